#!/bin/bash
# Verifier entry: runs each check separately, writes /logs/verifier/{ctrf.json,reward.txt}.
python3 /tests/run_checks.py /tests/test_outputs.py --out /logs/verifier
