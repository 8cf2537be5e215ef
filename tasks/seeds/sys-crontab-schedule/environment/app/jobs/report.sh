#!/bin/bash
# report job
echo "report ran at $(date -Is)"
