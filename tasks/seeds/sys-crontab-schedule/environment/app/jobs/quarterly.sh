#!/bin/bash
# quarterly job
echo "quarterly ran at $(date -Is)"
