// The text `actorkv --help` prints: every command, option and exit code.

let usage = """
actorkv: command-line client of the ActorKV server (actorkvd).

Usage: actorkv [--socket PATH] [--timeout SECS] COMMAND [ARGUMENTS...]

Commands:
  get NS KEY                  print the value's exact bytes, with NO newline added
                              (so $(actorkv get ns key) and binary values are exact); exit 1 if missing
  put NS KEY VALUE            store VALUE; VALUE '-' reads the value from standard input to EOF
                              (also after '--'; to store '-' itself: printf - | actorkv put NS KEY -)
  put --if-version V NS KEY VALUE
                              store VALUE only if KEY's version is V (0: only if KEY is absent);
                              print the new version; exit 5, writing nothing, if it is not
  put --ttl SECS NS KEY VALUE KEY expires SECS seconds from now (more than 0, at most 1000000000;
                              fractions allowed, rounded up to whole milliseconds): then it is
                              gone for every read. A put without
                              --ttl removes any expiry KEY had. (--ttl and --if-version combine.)
                              There is no --ephemeral: a key that belongs to actorkv's own
                              connection would be deleted as soon as actorkv exits. To hold a key
                              for as long as a command runs, use lock.
  pttl NS KEY                 print the milliseconds KEY has left before it expires; -1 if it has
                              no expiry of its own (the namespace's, if any, is pttl NS: a key
                              goes at the earlier of the two); print -2 and exit 1 if KEY is missing
  expire NS KEY SECS          KEY expires SECS seconds from now (more than 0, at most 1000000000;
                              fractions allowed, rounded up to whole milliseconds; to delete a
                              key now, del it), keeping its value; print 1, or print 0 and exit
                              1 if KEY is missing. incr keeps an expiry: a count within a window is
                              incr, then expire when incr printed 1
  persist NS KEY              remove KEY's expiry; print 1, or 0 if it had none (or is missing)
  expire NS SECS, pttl NS, persist NS
                              the same for the whole namespace (Redis's EXPIRE of a hash): when
                              its deadline passes every key goes; writes keep it, the last key's
                              delete ends it. expire prints 0 and exits 1 if NS holds no key
  getv NS KEY                 print KEY's version on one line, then the value's exact bytes
                              (no newline added); print 0 and exit 1 if KEY is missing
  incr NS KEY [DELTA]         add DELTA (default 1, may be negative) to the integer under KEY
                              (missing: 0); print the result
  del NS KEY...               remove keys; print how many existed
  exists NS KEY...            print how many of the keys exist; exit 1 unless all of them do
  count NS                    print the number of keys in NS
  memory NS                   print the bytes NS takes in the server's memory (an estimate from
                              its exact counts of keys, bytes and expiries: MEMORY USAGE); exit 1,
                              printing nothing, if NS holds no key. Not through an etcd agent
  scan [--json] [--] NS [PREFIX]
                              print every entry (whose key starts with PREFIX) in key order, as
                              KEY<TAB>VALUE lines; in keys and values, backslash, tab, newline and
                              carriage return are written as \\\\ \\t \\n \\r so that each entry is one line.
                              --json prints a JSON array of {"key": ..., "value": ...} objects
                              instead; a key or value that is not valid UTF-8 is given as
                              "key_base64" / "value_base64" (base64 of the exact bytes) instead.
  batch NS OP...              apply the ops all-or-nothing; OP is 'put KEY VALUE', 'del KEY',
                              'ifversion KEY V' (a guard: apply only if KEY's version is V) or
                              'incr KEY DELTA'; print one line per op: OK for put and ifversion,
                              1 or 0 (existed) for del, the new value for incr; exit 5, applying
                              nothing, if a guard does not hold
  changes [--from SEQ | --snapshot] [--] NS [PREFIX]
                              follow NS's changes (to keys that start with PREFIX) as they are
                              written, until interrupted: one line per key that a change wrote,
                              SEQ<TAB>KEY<TAB>VALUE, with SEQ the change's sequence number and KEY
                              and VALUE escaped as scan escapes them; a deleted key's VALUE is \\N
                              (unambiguous: in an escaped value a backslash is followed by \\, t, n
                              or r only). The lines of one change are written, and flushed, together.
                              --from SEQ  first every change after SEQ (to resume: pass the last
                                          SEQ you read; 0: every change the server holds)
                              --snapshot  first every key and its value as of one sequence S, as
                                          lines S<TAB>KEY<TAB>VALUE, then the changes after S
                              neither     the changes from now on
                              If the connection breaks (the server restarts, is killed, drops a
                              reader that lags; an agent loses etcd), it reconnects and resumes after the last line
                              printed: no change is missed or printed twice. (A --snapshot cut
                              short is taken again as of a later S; it prints only the keys not
                              printed yet or changed since, and then a deleted line for each key
                              printed that is gone, all with the new S.) It gives up (exit 4)
                              when it cannot reconnect for --timeout seconds (0: it never gives up),
                              exits 6 when the server no longer holds the changes after SEQ
                              (COMPACTED; follow with --snapshot instead), and 8 when it may not
                              read NS (NOPERM: refused, or cut off by a reload of the server's rules).
                              It ends once whoever reads its output has gone, by SIGPIPE as a write
                              would end it (as tail -f does): to wait for the next change to the
                              keys that start with P,
                              actorkv changes NS P | head -n 1
  lock [--timeout SECS] [--ttl SECS] NS KEY [--] COMMAND [ARG...]
                              wait for the lock named KEY in NS, run COMMAND (looked up in PATH)
                              holding it, release it when COMMAND exits, and exit with COMMAND's
                              exit status (128+N if signal N killed it), as flock(1) does. COMMAND
                              gets the lock's fencing token in $ACTORKV_LOCK_TOKEN: a number larger
                              for each holder of the lock than for every holder before it (pass it
                              with writes that a resource can refuse when it has seen a larger
                              one). While held, KEY's value is HOST:PID of the actorkv holding it.
                              The lock is KEY, written on a connection of its own: the server
                              releases the lock when that connection closes, and COMMAND inherits
                              it, as do the processes COMMAND starts. The lock is held while any
                              of them has the connection open: if actorkv is killed (even with
                              kill -9), until COMMAND has exited too; and a process that COMMAND
                              started (a daemon) and that still has the connection when COMMAND
                              exits keeps the lock, as with flock: actorkv exits then without
                              releasing it, and the server releases it once the last process
                              that has the connection exits or closes it. (actorkv looks for such
                              a process in /proc, among the processes it may inspect: its user's.)
                              So the lock is never left behind, and actorkv does not release it
                              while COMMAND runs (a server restart or --ttl can: see exit 4).
                              The connection keeps the rights of the user who ran actorkv (under
                              --acl, and with every right if that is the server's user): a
                              COMMAND that drops privileges (setpriv, runuser, su) can still use
                              them. Drop them first: setpriv ... actorkv lock NS KEY -- COMMAND.
                              Waiting follows NS's changes (no polling).
                              --timeout SECS  give up after SECS seconds (exit 7; COMMAND is not
                                              run); 0: one attempt; default: wait for ever. (The
                                              --timeout before 'lock' bounds each server reply.)
                                              A server restarted meanwhile is waited for, up to
                                              SECS (a minute without --timeout; exit 4 after)
                              --ttl SECS      the lock expires SECS seconds after it is taken, even
                                              if COMMAND still runs (a bound on a holder that hangs)
                              Exit 4 when the server cannot be reached, or when the lock was lost
                              before COMMAND ended (its connection broke: the server stopped or
                              was restarted; or --ttl ran out): the message gives COMMAND's status.
                              Exit 127 if COMMAND is not found, 126 if it cannot be run. A
                              file that is neither a binary nor a #! script is run with /bin/sh,
                              as flock(1) (execvp) runs it.
  compact NS                  snapshot NS and drop the log segments the snapshot covers, but
                              those holding its last --changes-history changes (kept for
                              CHANGES FROM, up to --changes-history-bytes)
  unlink NS...                remove namespaces, their keys and files; print how many existed.
                              A name used again numbers its versions on after its earlier life
  rename NS NEWNS             NEWNS gets NS's keys (with their expiries, and NS's own) and drops its
                              own; NS is gone; atomic. Exit 1 if NS holds no key
  renamenx NS NEWNS           the same only if NEWNS holds no key; exit 5, renaming nothing, if it does
  copy [--replace] NS NEWNS   NEWNS gets a copy of NS's keys (with their expiries, and NS's own) as
                              of one moment; NS unchanged; atomic. Exit 1 if NS holds no key, 5 if
                              NEWNS holds one (--replace: its keys are dropped first)
  backup DIR                  have the server write every namespace, as of one moment, to the
                              new directory DIR (its parent must exist; relative to actorkv's
                              working directory); print DIR's absolute path. DIR is a data
                              directory: actorkvd --data-dir DIR serves it as it is. Waits as
                              long as the backup takes, unless --timeout is given. Only the
                              server's own user may run it under --acl
  namespaces                  print the namespace names, one per line
  info                        print the server's INFO text, in lines that end with a newline
                              (the server's CRLF line ends made LF, as the other commands print)
  sync                        wait until every write acknowledged so far (anyone's) is on disk,
                              fsync'd, whatever the server's --fsync (WAITAOF 1 0 0): after a
                              put that must survive a power loss before the script goes on
  ping [MESSAGE]              print PONG (or MESSAGE)
  clients                     print a line per connection open on the server: id=… name=…
                              age=… idle=… (seconds since it last sent a request) flags=… (UP:
                              follows changes) … cmd=… (its last command) … uid=… gid=… pid=…
                              (CLIENT LIST)
  kill-client ID              close connection ID at once, which releases the keys it owned (its
                              locks, say); print 1, or print 0 and exit 1 if no connection has
                              that id. clients and kill-client: only the server's own user, under
                              actorkvd --acl
  shutdown                    stop the server as SIGTERM does (requests in flight finished, every
                              namespace fsync'd, its socket removed); return once it has. Waits
                              as long as that takes, unless --timeout is given. Only the
                              server's own user, under actorkvd --acl

Options:
  --socket PATH, -s PATH      the server's socket (default: $ACTORKV_SOCKET, else ./actorkv.sock)
  --timeout SECS, -t SECS     give up (exit 4) when the server does not accept the connection, or
                              sends nothing of a reply, for SECS seconds (default 10; fractions
                              allowed; 0 waits forever)
  --help, -h                  print this text
  --version                   print actorkv's version (the same as actorkvd --version's)

A command's options may come anywhere among its arguments (lock's: before NS); an argument
that starts with '--' and is not one of them is a usage error, and so is a namespace that looks
like a one-letter option ('-n', as flock -n; commands have none) unless it comes after '--'. --help after any command (before
a '--'; lock: among its options) prints this text. The first '--' ends them: every argument
after it is taken as it is, even one that looks like an option, so that a key, value or prefix
that starts with '--' can be given (a script passing a key it did not choose puts '--' first):
  actorkv put ns key -- --ttl     stores the value '--ttl'
  actorkv get ns -- "$key"        prints the value of the key '--help', if that is $key
  actorkv scan ns -- --json       prints the entries whose key starts with '--json'
(The options before 'COMMAND' are actorkv's own: --socket, --timeout, --help, --version; '--' ends
them too.)

Commands that change data (put, compact) print nothing on success; put --if-version prints the
new version.

Exit status:
  0  success
  1  not found (get of a missing key; exists when not every key exists; pttl or expire of a
     missing key; rename, copy or memory of a namespace that holds no key)
  2  usage error
  3  the server refused the request (its error 'CODE message' is printed on standard error;
     NOPERM is 8), or replied with something unexpected; or standard output could not be
     written ("actorkv: cannot write standard output: ..." on standard error)
  4  cannot connect to the server (nothing listens on the socket, or the server refused the
     connection with MAXCLIENTS, or with NOPERM for this user: actorkvd --allow-uid or
     --allow-gid), the server did not answer within --timeout, or the connection broke;
     lock: also when the lock was lost before COMMAND ended. After a command that writes (put,
     incr, del, expire, persist, batch, compact) had sent its request, it is unknown whether
     the write was applied (the message says so): read before repeating an incr
  5  a condition did not hold (put --if-version, a batch's ifversion, renamenx or copy without
     --replace onto a namespace that holds a key): nothing was written
  6  changes --from SEQ: the server no longer holds every change after SEQ (COMPACTED)
  7  lock: the lock was not acquired within lock --timeout SECS (COMMAND did not run)
  8  the server denied a right this command needs on its namespace (NOPERM, under actorkvd
     --acl; its error is printed on standard error as for 3): nothing was applied; changes:
     also when a reload of the server's rules withdrew the right to read NS
lock exits with COMMAND's status otherwise (which can be any of these numbers too: its standard
error tells them apart), 126 or 127 when COMMAND cannot be run.

"""
