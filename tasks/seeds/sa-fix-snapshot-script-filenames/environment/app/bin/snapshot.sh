#!/bin/bash
# snapshot.sh SRC DEST - copy config/text files into a snapshot directory with a manifest.
SRC=$1
DEST=$2

mkdir -p $DEST
cd $SRC

for f in $(find . -type f -name *.txt -o -type f -name *.conf); do
    rel=${f#./}
    mkdir -p $DEST/$(dirname $rel)
    cp $rel $DEST/$rel
done

cd $DEST
for f in $(ls -R | grep -E '\.(txt|conf)$'); do
    sha256sum $f
done | sort > MANIFEST
