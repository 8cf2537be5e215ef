#!/bin/bash
set -euo pipefail
cd /app/provision
tail -n +2 groups.csv | while IFS=, read -r name gid; do
  if getent group "$name" >/dev/null; then groupmod -g "$gid" "$name"; else groupadd -g "$gid" "$name"; fi
done
while read -r name; do
  [ -n "$name" ] || continue
  if id "$name" >/dev/null 2>&1; then userdel -r "$name" 2>/dev/null || userdel "$name"; fi
  rm -rf "/home/$name"
  getent group "$name" >/dev/null && groupdel "$name"
done < remove.txt
tail -n +2 users.csv | while IFS=, read -r name uid pgroup sgroups shell home create; do
  args=(-u "$uid" -g "$pgroup" -s "$shell" -d "$home")
  [ -n "$sgroups" ] && args+=(-G "${sgroups//;/,}")
  if [ "$create" = yes ]; then mkdir -p "$(dirname "$home")"; args+=(-m); else args+=(-M); fi
  useradd -N "${args[@]}" "$name"
  if [ "$create" = yes ]; then chown "$name:$pgroup" "$home"; chmod 0750 "$home"; fi
done
tail -n +2 dirs.csv | while IFS=, read -r path owner group mode; do
  mkdir -p "$path"
  chown "$owner:$group" "$path"
  chmod "0$mode" "$path"   # 5 digits: GNU chmod then also clears inherited setgid
done
