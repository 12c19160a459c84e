#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs coverage-guided fuzzing campaigns: each fuzz target of the fuzz build
# (clang, -Dfuzzing=true, ASan + UBSan, leak checking) for SECONDS seconds,
# seeded from its checked-in corpus; inputs that add coverage are merged
# back into tests/fuzz/<area>/corpus*, crashes land in $ART. Prints one
# line per target: runs, final coverage, features, corpus size.
#   scripts/fuzz-campaign.sh [SECONDS] [target-name...]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER=${1:-600}; shift || true
BUILD=${BUILD_DIR:-build-fuzz}
ART=${ART:-/tmp/proflet-fuzz-artifacts}
RSS_MB=${RSS_MB:-1024}   # the chart's 256 MiB, with room for ASan's shadow
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$BUILD" -Dfuzzing=true \
    -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C "$BUILD" >/dev/null
mkdir -p "$ART"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# name, executable, corpus, max input length
TARGETS=(
  "fuzz-config tests/fuzz/config/fuzz_config tests/fuzz/config/corpus 16384"
  "fuzz-relabel tests/fuzz/relabel/fuzz_relabel tests/fuzz/relabel/corpus 4096"
  "fuzz_pprof_delta tests/fuzz/pprof/fuzz_pprof_delta tests/fuzz/pprof/corpus/fuzz_pprof_delta 65536"
  "fuzz_pprof_validate tests/fuzz/pprof/fuzz_pprof_validate tests/fuzz/pprof/corpus/fuzz_pprof_validate 65536"
  "fuzz-net-oauth2-token tests/fuzz/net/fuzz_net_oauth2_token tests/fuzz/net/corpus_oauth2 8192"
  "fuzz-httpd-parse tests/fuzz/httpd/fuzz_httpd_parse tests/fuzz/httpd/corpus_parse 8192"
  "fuzz-httpd-query tests/fuzz/httpd/fuzz_httpd_query tests/fuzz/httpd/corpus_query 8192"
  "fuzz-httpd-auth tests/fuzz/httpd/fuzz_httpd_auth tests/fuzz/httpd/corpus_auth 512"
  "fuzz-httpd-web tests/fuzz/httpd/fuzz_httpd_web tests/fuzz/httpd/corpus_web 16384"
  "fuzz-disc-watch tests/fuzz/discovery/fuzz_disc_watch tests/fuzz/discovery/corpus/watch 16384"
  "fuzz-disc-file_sd tests/fuzz/discovery/fuzz_disc_file_sd tests/fuzz/discovery/corpus/file_sd 16384"
  "fuzz-forward-classify tests/fuzz/forward/fuzz_forward_classify tests/fuzz/forward/corpus/classify 4096"
  "fuzz-forward-spool tests/fuzz/forward/fuzz_forward_spool tests/fuzz/forward/corpus/spool 65536"
  "fuzz-agent-ui-query tests/fuzz/agent/fuzz_agent_ui_query tests/fuzz/agent/corpus_ui_query 4096"
)
for t in "${TARGETS[@]}"; do
  read -r name exe corpus maxlen <<<"$t"
  if [ "$#" -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  work=$(mktemp -d)
  cp "$corpus"/* "$work"/
  log="$ART/$name.log"
  "$BUILD/$exe" "$work" -max_total_time="$SECONDS_PER" -max_len="$maxlen" \
    -rss_limit_mb="$RSS_MB" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$ART/$name-" >"$log" 2>&1 || echo "$name: finding, see $log"
  "$BUILD/$exe" -merge=1 "$corpus" "$work" >/dev/null 2>&1
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  last=$(grep -E '^#[0-9]+.*cov:' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || echo "cov: ? ft: ?")
  echo "$name runs: $runs $last corpus: $(ls "$corpus" | wc -l)"
  rm -rf "$work"
done
