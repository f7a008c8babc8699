package sqldb

import "context"

// KeyCounts runs query, which selects a concurrency key and a number per
// row, and returns them as a map: the oldest job of each key
// (JobsKeyHeads), or its jobs in delivery (JobsKeyBusy).
func KeyCounts(ctx context.Context, db DBTX, query string, args ...any) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			k string
			n int64
		)
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}

// StringArgs turns ss into statement arguments after lead.
func StringArgs(ss []string, lead ...any) []any {
	args := append(make([]any, 0, len(lead)+len(ss)), lead...)
	for _, s := range ss {
		args = append(args, s)
	}
	return args
}

// Ints converts the numbers of m to int.
func Ints(m map[string]int64) map[string]int {
	out := make(map[string]int, len(m))
	for k, n := range m {
		out[k] = int(n)
	}
	return out
}
