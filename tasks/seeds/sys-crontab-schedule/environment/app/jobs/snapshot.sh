#!/bin/bash
# snapshot job
echo "snapshot ran at $(date -Is)"
