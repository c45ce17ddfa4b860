// Everything is in the header (static inline); SwiftPM wants a source file for a C target.
#include "CActorKVPrefetch.h"
