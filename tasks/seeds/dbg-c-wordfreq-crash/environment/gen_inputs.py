"""Writes /app/wordfreq/inputs/: a small text that works, and two real-world files that crash."""
import os
import random

rng = random.Random(5)
d = "/app/wordfreq/inputs"
os.makedirs(d, exist_ok=True)
base = "the quick brown fox jumps over the lazy dog and the cat sat on the mat".split()
with open(f"{d}/small.txt", "w") as f:
    for _ in range(40):
        f.write(" ".join(rng.choice(base) for _ in range(12)) + ".\n")
with open(f"{d}/corpus.txt", "w") as f:  # ~9000 distinct words
    syll = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "du", "xa", "zo"]
    for _ in range(6000):
        f.write(" ".join("".join(rng.choice(syll) for _ in range(rng.randint(1, 4)))
                         for _ in range(10)) + "\n")
with open(f"{d}/dna.txt", "w") as f:  # very long "words"
    for i in range(30):
        f.write("sequence " + "".join(rng.choice("ACGT") for _ in range(rng.randint(50, 3000))) + " end\n")
os.system("make -s -C /app/wordfreq >/dev/null 2>&1")
