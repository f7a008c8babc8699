package store

import "context"

// SecretStore keeps secrets the nodes of a database share, such as the key
// nodes authenticate their nudges to each other with. A secret is made once
// and never changes.
type SecretStore interface {
	// SecretEnsure stores value under name unless a secret of that name
	// exists, and returns the stored value: the first node's, whichever
	// node asks.
	SecretEnsure(ctx context.Context, name, value string) (string, error)
}
