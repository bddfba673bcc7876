#!/bin/sh
# The smallest ACP agent this benchmark could write: a POSIX shell loop, so that a few hundred of them cost the
# machine little and the memory measured is the client's. It answers initialize, session/new and session/prompt
# (one agent_message_chunk "hi", then end_turn) and ignores everything else. It expects tinyacp's encoding:
# "id" before "method" on a request line.
while IFS= read -r line; do
    id=${line#*'"id":'}
    id=${id%%,*}
    case $line in
    *'"method":"initialize"'*)
        printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}\n' "$id"
        ;;
    *'"method":"session/new"'*)
        printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"tiny"}}\n' "$id"
        ;;
    *'"method":"session/prompt"'*)
        printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"tiny","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}\n{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}\n' "$id"
        ;;
    esac
done
