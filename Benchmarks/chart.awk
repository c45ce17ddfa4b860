# Renders a horizontal bar chart of ActorKV / Redis throughput ratios as SVG (POSIX awk, no gawk).
#
# Input: one bar per line, "ratio<TAB>label" (a ratio of "n/a" draws no bar).
# Usage: awk -F'\t' -v title="…" -f chart.awk ratios.tsv > throughput.svg

function esc(s) {
    gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); gsub(/>/, "\\&gt;", s); gsub(/"/, "\\&quot;", s)
    return s
}

{
    n++
    ratio[n] = $1
    label[n] = $2
    if ($1 != "n/a" && $1 + 0 > top) top = $1 + 0
}

END {
    if (top < 1) top = 1
    top = top * 1.15
    left = 300; width = 380; row = 30; head = 50
    w = left + width + 70
    h = head + n * row + 40
    x1 = left + width / top       # where ratio 1.0 (parity with Redis) falls
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", w, h, w, h
    printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
    printf "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">%s</text>\n", 10, esc(title)
    printf "<text x=\"%d\" y=\"40\" fill=\"#555\">%s</text>\n", 10, esc(subtitle)
    for (i = 1; i <= n; i++) {
        y = head + (i - 1) * row
        printf "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", left - 8, y + 19, esc(label[i])
        if (ratio[i] == "n/a") {
            printf "<text x=\"%d\" y=\"%d\" fill=\"#999\">n/a</text>\n", left + 4, y + 19
            continue
        }
        bw = width * ratio[i] / top
        colour = (ratio[i] + 0 >= 1) ? "#2e7d32" : "#1565c0"
        printf "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", left, y + 6, bw, row - 10, colour
        printf "<text x=\"%.1f\" y=\"%d\">%.2f×</text>\n", left + bw + 5, y + 19, ratio[i]
    }
    bottom = head + n * row
    printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#c62828\" stroke-dasharray=\"4 3\"/>\n", x1, head, x1, bottom + 4
    printf "<text x=\"%.1f\" y=\"%d\" fill=\"#c62828\" text-anchor=\"middle\">Redis = 1.0</text>\n", x1, bottom + 18
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", left, head, left, bottom
    printf "</svg>\n"
}
