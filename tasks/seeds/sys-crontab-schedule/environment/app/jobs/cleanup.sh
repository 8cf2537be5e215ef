#!/bin/bash
# cleanup job
echo "cleanup ran at $(date -Is)"
