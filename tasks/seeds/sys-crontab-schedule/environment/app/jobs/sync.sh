#!/bin/bash
# sync job
echo "sync ran at $(date -Is)"
