#!/bin/bash
# /app/mytool: a project tree with build debris mixed in.
set -euo pipefail
mkdir -p /app/mytool && cd /app/mytool
echo 0.9.3 > VERSION
echo 1717243200 > RELEASE_EPOCH
mkdir -p mytool/__pycache__ mytool/plugins/__pycache__ bin docs/api build/lib tests lib
printf '"""mytool"""\n__version__ = "0.9.3"\n' > mytool/__init__.py
printf 'def main():\n    print("mytool")\n' > mytool/cli.py
printf 'NAME = "csv"\n' > mytool/plugins/csv_plugin.py
printf 'NAME = "json"\n' > mytool/plugins/json_plugin.py
printf '#!/bin/sh\nexec python3 -m mytool.cli "$@"\n' > bin/mytool
chmod 755 bin/mytool
printf '#!/bin/sh\necho install\n' > install.sh
chmod 750 install.sh
echo "# mytool" > README.md
echo "MIT" > LICENSE
echo "api docs" > docs/api/index.md
echo "guide" > docs/guide.md
echo "docs index" > docs.md
echo "helper" > lib/helper.py
echo "lib notes" > lib.txt
printf 'def test_x():\n    assert True\n' > tests/test_cli.py
chmod 600 tests/test_cli.py
# debris
printf '\x00\x01pyc' > mytool/__pycache__/cli.cpython-311.pyc
printf '\x00\x01pyc' > mytool/plugins/__pycache__/csv_plugin.cpython-311.pyc
printf 'stale' > mytool/old.pyc
printf 'swap' > mytool/.cli.py.swp
printf 'swap' > .README.md.swp
printf 'mac' > .DS_Store
printf 'mac' > docs/.DS_Store
echo "built" > build/lib/mytool.so
touch -d '2024-05-01 12:00:00' -- $(find . -type f)
