#!/bin/sh
# Starts vLLM's OpenAI server in the official vllm/vllm-openai image (compose.yaml mounts this
# file read-only). compose.yaml's "command:" flags arrive as "$@". Two things the image's own
# entrypoint cannot do:
# - A (re)started vLLM loads the live adapter itself, before it takes traffic: adapter-sync
#   keeps "NAME=PATH" of the live version in $PARLEY_LIVE_ADAPTER_FILE on the adapters volume,
#   and it becomes --lora-modules here (when that adapter folder exists).
# - $VLLM_EXTRA_ARGS (e.g. "--enable-prefix-caching --max-num-seqs 64") is split into words
#   and appended, as the embedded `make run` does with the same setting.
set -eu
live_file="${PARLEY_LIVE_ADAPTER_FILE:-/data/adapters/live-adapter}"
set -- serve "${PARLEY_VLLM_MODEL:-/models/base}" "$@"
if [ -s "$live_file" ]; then
    live="$(head -n 1 "$live_file")"
    if [ -d "${live#*=}" ]; then
        echo "vllm-start | loading the live adapter ${live%%=*} at start"
        set -- "$@" --lora-modules "$live"
    else
        echo "vllm-start | the live adapter folder ${live#*=} is missing; base model only"
    fi
fi
# shellcheck disable=SC2086 # word splitting of the extra arguments is the point
exec vllm "$@" ${VLLM_EXTRA_ARGS:-}
