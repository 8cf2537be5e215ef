#!/bin/bash
# rotate job
echo "rotate ran at $(date -Is)"
