#!/usr/bin/env bash
# Packs, from this machine's Debian packages, what the GPU image lacks to build the trainer alone
# (cmake -DVITSIM_TRAINER_ONLY=ON -DVITSIM_DEPS_DIR=bench/gpu/deps): header-only fmt, nlohmann-json and
# CLI11; pugixml's headers and static library; libjpeg, libpng and zlib headers and static libraries.
# bench/gpu/deps/ is gitignored: a device session carries it (run's carry list: bench/gpu/deps).
#   bash bench/gpu/pack_deps.sh
set -euo pipefail
cd "$(dirname "$0")"
dest=deps
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
incdirs=(/usr/include "/usr/include/$multiarch")
libdirs=("/usr/lib/$multiarch" /usr/lib)

# Debian package of each file (installed with apt-get when a file is missing).
declare -A pkg=(
  [fmt]=libfmt-dev [nlohmann]=nlohmann-json3-dev [CLI]=libcli11-dev
  [pugixml.hpp]=libpugixml-dev [pugiconfig.hpp]=libpugixml-dev [libpugixml.a]=libpugixml-dev
  [jpeglib.h]=libjpeg62-turbo-dev [jconfig.h]=libjpeg62-turbo-dev [jmorecfg.h]=libjpeg62-turbo-dev
  [jerror.h]=libjpeg62-turbo-dev [libjpeg.a]=libjpeg62-turbo-dev
  [png.h]=libpng-dev [pngconf.h]=libpng-dev [pnglibconf.h]=libpng-dev [libpng16.a]=libpng-dev
  [zlib.h]=zlib1g-dev [zconf.h]=zlib1g-dev [libz.a]=zlib1g-dev
)
headers=(fmt nlohmann CLI pugixml.hpp pugiconfig.hpp jpeglib.h jconfig.h jmorecfg.h jerror.h png.h pngconf.h
         pnglibconf.h zlib.h zconf.h)
libs=(libpugixml.a libjpeg.a libpng16.a libz.a)

locate() {  # NAME DIR... -> the first DIR/NAME that exists (symlinks resolved)
  local name=$1; shift
  for d in "$@"; do [[ -e $d/$name ]] && { readlink -f "$d/$name"; return 0; }; done
  return 1
}

missing=()
for h in "${headers[@]}"; do locate "$h" "${incdirs[@]}" >/dev/null || missing+=("${pkg[$h]}"); done
for l in "${libs[@]}"; do locate "$l" "${libdirs[@]}" >/dev/null || missing+=("${pkg[$l]}"); done
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "pack_deps: installing ${missing[*]}"
  apt-get update -qq && apt-get install -y -qq "${missing[@]}"
fi

# fmt header-only needs format-inl.h (the definitions format.cc would compile).
[[ -e /usr/include/fmt/format-inl.h ]] || { echo "pack_deps: /usr/include/fmt/format-inl.h missing" >&2; exit 1; }

rm -rf "$dest"
mkdir -p "$dest/include" "$dest/lib"
for h in "${headers[@]}"; do cp -rL "$(locate "$h" "${incdirs[@]}")" "$dest/include/$h"; done
for l in "${libs[@]}"; do cp -L "$(locate "$l" "${libdirs[@]}")" "$dest/lib/$l"; done
{
  echo "# Packed by bench/gpu/pack_deps.sh on $(hostname) ($(. /etc/os-release; echo "$PRETTY_NAME")), $(date -u +%FT%TZ)"
  for p in $(printf '%s\n' "${pkg[@]}" | sort -u); do dpkg-query -W -f='${Package} ${Version}\n' "$p" 2>/dev/null || true; done
} >"$dest/VERSIONS"
echo "pack_deps: $(du -sh "$dest" | cut -f1) in bench/gpu/$dest ($(find "$dest" -type f | wc -l) files; the carry limit is 64 MiB)"
cat "$dest/VERSIONS"
