package mysql

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
)

// serverInfo is what the store needs to know about its server, read once
// per pool (Store.server).
type serverInfo struct {
	// returning: the server takes INSERT … RETURNING (MariaDB 10.5+).
	// Every job id then comes from the statement that inserts it.
	returning bool
	// galera: the server is a member of a Galera cluster (wsrep_on). Its
	// commits certify optimistically across members, it re-runs an
	// autocommit statement that lost a certification conflict, its named
	// locks are member-local and its reads are not causal across members
	// unless asked (syncWait).
	galera bool
	// step is @@auto_increment_increment: on MySQL, which has no
	// RETURNING, the ids of one multi-row INSERT are LAST_INSERT_ID() +
	// i*step. Galera changes it on view changes, so it is never used there
	// (Galera runs on MariaDB, which has RETURNING).
	step int64
}

// serverCache holds the server's serverInfo once a read succeeded: the
// hot statements load it without a lock.
type serverCache struct {
	mu   sync.Mutex // serialises the first reads
	info atomic.Pointer[serverInfo]
}

// server tells what the server is, read on first use rather than in Open
// (Open does not need the server) and cached after the first success.
func (s *Store) server(ctx context.Context) (serverInfo, error) {
	if info := s.srv.info.Load(); info != nil {
		return *info, nil
	}
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	if info := s.srv.info.Load(); info != nil {
		return *info, nil
	}
	var (
		info        serverInfo
		mariadb     bool
		name, wsrep string
	)
	err := s.db.QueryRowContext(ctx, "/* rowq:server */ SELECT @@auto_increment_increment, VERSION() LIKE '%MariaDB%'").Scan(&info.step, &mariadb)
	if err != nil {
		return serverInfo{}, err
	}
	if mariadb {
		// wsrep_on is OFF without Galera, and unknown to a MariaDB built
		// without it (and to MySQL): SHOW then answers no row.
		err := s.db.QueryRowContext(ctx, "/* rowq:server */ SHOW GLOBAL VARIABLES LIKE 'wsrep_on'").Scan(&name, &wsrep)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return serverInfo{}, err
		}
		info.galera = wsrep == "ON"
	}
	info.returning = mariadb && !s.noReturning
	s.srv.info.Store(&info)
	return info, nil
}

// syncWaitSQL runs q, on Galera, only once the member has applied every
// write the cluster committed before q started (wsrep_sync_wait 3: reads,
// updates and deletes), in the one round trip of q: a statement that acts
// on a row another member just wrote must see it. Elsewhere q is unchanged.
func syncWaitSQL(info serverInfo, q string) string {
	if !info.galera {
		return q
	}
	return "SET STATEMENT wsrep_sync_wait = 3 FOR " + q
}

// causal is syncWaitSQL for the store's server. The statements that act on
// a row another member may just have written go through it: a job read or
// written by id (a client's ack may reach a node on another member than
// the node that grabbed it), a grab (a job enqueued or released through
// another member), and the compare-and-sets of locks. The statements a
// node runs on its own rows, through its own member, do not.
func (s *Store) causal(ctx context.Context, q string) (string, error) {
	info, err := s.server(ctx)
	if err != nil {
		return "", err
	}
	return syncWaitSQL(info, q), nil
}
