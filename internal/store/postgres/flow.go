package postgres

import (
	"context"
	"errors"

	"github.com/rowq/rowq/internal/store"
)

// Placeholders until this dialect's flows are built (replace this file).

var errNoFlow = errors.New("flows are not built on this dialect yet")

func (s *Store) JobsInsertFlow(context.Context, *store.FlowInsertParams) (*store.FlowInserted, error) {
	return nil, errNoFlow
}
func (s *Store) FlowGet(context.Context, int64) (*store.FlowInfo, error) { return nil, errNoFlow }
func (s *Store) JobsBlocked(context.Context, *store.JobsBlockedParams) ([]*store.BlockedJob, error) {
	return nil, errNoFlow
}
func (s *Store) BatchGet(context.Context, int64) (*store.Batch, error) { return nil, errNoFlow }
func (s *Store) BatchesList(context.Context, *store.BatchesListParams) ([]*store.Batch, error) {
	return nil, errNoFlow
}
func (s *Store) FlowWatch(func(store.FlowDone)) {}
