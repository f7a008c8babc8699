#!/usr/bin/env bash
# A client script written for Fireworq, as its users write them: curl and jq
# against Fireworq's documented endpoints and fields, nothing of rowq's own.
# The process tests (cmd/rowq) run it unchanged against rowq on every
# database. FIREWORQ is the server's base URL; WORKER a worker URL that
# answers "permanent-failure" to the payload "fail" and "success" otherwise.
set -euo pipefail
: "${FIREWORQ:?base URL of the server}" "${WORKER:?a worker URL}"

fail() { echo "FAIL: $*" >&2; exit 1; }
api() { # METHOD PATH [BODY]
  if [ $# -ge 3 ]; then
    curl -fsS -X "$1" -H 'Content-Type: application/json' -d "$3" "$FIREWORQ$2"
  else
    curl -fsS -X "$1" "$FIREWORQ$2"
  fi
}
status() { curl -s -o /dev/null -w '%{http_code}' -X "$1" "$FIREWORQ$2"; }
check() { # WHAT JQ-FILTER: reads JSON on stdin
  jq -e "$2" >/dev/null || fail "$1"
}
eventually() { # WHAT COMMAND...: retries for up to 30 s
  local what=$1; shift
  for _ in $(seq 150); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  fail "$what"
}

# Queues and routings.
api PUT /queue/mail '{"polling_interval": 100, "max_workers": 4}' | check "PUT /queue" '.name == "mail" and .polling_interval == 100 and .max_workers == 4'
api GET /queue/mail | check "GET /queue" '.max_workers == 4'
api GET /queues | check "GET /queues" 'map(.name) | index("mail") != null'
api PUT /routing/welcome '{"queue_name": "mail"}' | check "PUT /routing" '.job_category == "welcome" and .queue_name == "mail"'
api GET /routing/welcome | check "GET /routing" '.queue_name == "mail"'
api GET /routings | check "GET /routings" 'map(select(.job_category == "welcome")) | length == 1'
[ "$(status GET /routing/nope)" = 404 ] || fail "GET /routing of a missing category is not 404"

# Jobs: one delivered, one deferred, one unrouted to the default queue.
done_id=$(api POST /job/welcome "{\"url\": \"$WORKER\", \"payload\": {\"to\": \"ada\"}, \"max_retries\": 2, \"retry_delay\": 1, \"timeout\": 10}" | jq -e .id)
later_id=$(api POST /job/welcome "{\"url\": \"$WORKER\", \"payload\": \"later\", \"run_after\": 3600}" | jq -e .id)
api POST /job/unrouted "{\"url\": \"$WORKER\"}" | check "default queue" '.queue_name == "default" and .category == "unrouted"'
[ "$(status POST /job/welcome)" = 400 ] || fail "POST /job without a body is not 400"
eventually "job $done_id delivered" test "$(status GET "/queue/mail/job/$done_id")" = 404

# Inspection.
api GET /queue/mail/deferred | check "GET deferred" ".jobs | map(.id) | index($later_id) != null"
api GET "/queue/mail/job/$later_id" | check "GET job" ".id == $later_id and .status == \"claimed\" and .category == \"welcome\" and .payload == \"later\""
api GET /queue/mail/waiting | check "GET waiting" '.jobs | type == "array"'
api GET /queue/mail/grabbed | check "GET grabbed" '.jobs | type == "array"'
api DELETE "/queue/mail/job/$later_id" | check "DELETE job" ".id == $later_id"
[ "$(status GET "/queue/mail/job/$later_id")" = 404 ] || fail "a deleted job is still there"

# Paging through deferred jobs with the cursor.
for i in 1 2 3 4 5; do api POST /job/welcome "{\"url\": \"$WORKER\", \"payload\": $i, \"run_after\": 600}" >/dev/null; done
seen=0 cursor=""
while :; do
  page=$(api GET "/queue/mail/deferred?limit=2${cursor:+&cursor=$cursor}")
  seen=$((seen + $(jq '.jobs | length' <<<"$page")))
  cursor=$(jq -r '.next_cursor // ""' <<<"$page")
  [ -n "$cursor" ] || break
done
[ "$seen" = 5 ] || fail "paging saw $seen deferred jobs, want 5"

# The failure log.
fail_id=$(api POST /job/welcome "{\"url\": \"$WORKER\", \"payload\": \"fail\", \"max_retries\": 3}" | jq -e .id)
eventually "job $fail_id in the failure log" sh -c "curl -fsS '$FIREWORQ/queue/mail/failed' | jq -e '.failed_jobs | map(.job_id) | index($fail_id) != null'"
entry=$(api GET /queue/mail/failed | jq -e ".failed_jobs[] | select(.job_id == $fail_id)")
check "failure entry" '.result.status == "permanent-failure" and .fail_count == 1 and .category == "welcome"' <<<"$entry"
entry_id=$(jq -e .id <<<"$entry")
api GET "/queue/mail/failed/$entry_id" | check "GET failed entry" ".job_id == $fail_id"
api GET "/queue/mail/failed?order=created" | check "failed by creation" '.failed_jobs | length >= 1'
api DELETE "/queue/mail/failed/$entry_id" | check "DELETE failed entry" ".id == $entry_id"

# Statistics, the dispatching node, version and settings.
eventually "stats counted" sh -c "curl -fsS '$FIREWORQ/queue/mail/stats' | jq -e '.total_pushes == 8 and .total_successes == 1 and .total_permanent_failures == 1 and .outstanding_jobs == 5'"
api GET /queue/mail/stats | check "stats fields" 'has("total_pops") and has("total_failures") and has("total_completes") and has("total_elapsed") and has("pushes_per_second") and has("pops_per_second") and has("total_workers") and has("idle_workers") and has("active_nodes")'
api GET /queues/stats | check "GET /queues/stats" '.mail.total_pushes == 8 and (.default | type == "object")'
eventually "a node dispatches mail" sh -c "curl -fsS '$FIREWORQ/queue/mail/node' | jq -e '.id and .host'"
api GET /version | check "GET /version" '.version | type == "string"'
api GET /settings | check "GET /settings" 'type == "object"'

# Clean up.
api DELETE /routing/welcome | check "DELETE /routing" '.job_category == "welcome"'
api DELETE /queue/mail | check "DELETE /queue" '.name == "mail"'
[ "$(status GET /queue/mail)" = 404 ] || fail "a deleted queue is still there"
echo "fireworq client script: OK"
