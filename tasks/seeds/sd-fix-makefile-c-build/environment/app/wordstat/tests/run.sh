#!/bin/bash
# Smoke test for build/wordstat; run from the project root (make test).
set -u
out=$(printf 'The cat and the hat.\nA Cat!\n' | ./build/wordstat)
expected='words: 7
unique: 5
mean_length: 2.71
stddev_length: 0.70
longest: the'
if [ "$out" = "$expected" ]; then echo "PASS"; else echo "FAIL"; echo "$out"; exit 1; fi
