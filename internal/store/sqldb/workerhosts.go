package sqldb

import (
	"strings"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// WorkerHostsDeleteSQL deletes a queue's worker hosts before they are
// written again (store.WorkerHostStore.WorkerHostsSet).
const WorkerHostsDeleteSQL = `/* rowq:worker_hosts.set */ DELETE FROM worker_hosts WHERE queue_name = ?`

// WorkerHostsListSQL reads the worker hosts that each queue's current
// leader recorded, of the queue given twice ("": every queue).
const WorkerHostsListSQL = `/* rowq:worker_hosts.list */
	SELECT w.queue_name, w.host, w.rate, w.breaker, w.failures, w.open_until, w.updated_at
	FROM worker_hosts w JOIN queues q ON q.name = w.queue_name AND q.leader = w.node
	WHERE ? = '' OR w.queue_name = ?
	ORDER BY w.queue_name, w.host`

// WorkerHostsInsertSQL returns one multi-row INSERT of p's hosts into
// worker_hosts and its arguments: updated_at is the SQL expression now,
// and at turns a time into the dialect's value of a time column.
func WorkerHostsInsertSQL(p *store.WorkerHostsSetParams, now string, at func(time.Time) any) (string, []any) {
	var q strings.Builder
	q.WriteString(`/* rowq:worker_hosts.set */ INSERT INTO worker_hosts
		(queue_name, host, node, rate, breaker, failures, open_until, updated_at) VALUES `)
	args := make([]any, 0, 7*len(p.Hosts))
	for i, h := range p.Hosts {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(" + Placeholders(7) + ", " + now + ")")
		var rate, until any // NULL unless set
		if h.Rate != nil {
			rate = *h.Rate
		}
		if h.OpenUntil != nil {
			until = at(*h.OpenUntil)
		}
		args = append(args, p.Queue, h.Host, p.Node, rate, h.Breaker, h.Failures, until)
	}
	return q.String(), args
}
