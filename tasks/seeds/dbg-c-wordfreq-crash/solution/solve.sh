#!/bin/bash
set -euo pipefail
cd /app/wordfreq
python3 - <<'PY'
src = open("wordfreq.c").read()
rep = [
    ("    return y->count - x->count;\n",
     "    if (x->count != y->count)\n        return y->count > x->count ? 1 : -1;\n    return strcmp(x->word, y->word);\n"),
    ("    char buf[32];\n    int len = 0, c;\n",
     "    size_t cap = 64;\n    char *buf = malloc(cap);\n    size_t len = 0;\n    int c;\n"),
    ("            buf[len++] = tolower(c);\n",
     "            if (len + 1 >= cap) {\n                cap *= 2;\n                buf = realloc(buf, cap);\n            }\n            buf[len++] = tolower(c);\n"),
    ("    struct entry **all = malloc(nwords);\n",
     "    struct entry **all = malloc((nwords ? nwords : 1) * sizeof *all);\n"),
    ("    for (int i = 0; i < n; i++)\n        printf",
     "    for (int i = 0; i < n && i < nwords; i++)\n        printf"),
]
for old, new in rep:
    assert old in src, old
    src = src.replace(old, new)
open("wordfreq.c", "w").write(src)
PY
make -s clean && make -s
./wordfreq inputs/corpus.txt 5 >/dev/null
