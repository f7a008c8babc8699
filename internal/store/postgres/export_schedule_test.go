package postgres

// DueSQL is the due-schedules SELECT, for the EXPLAIN test.
const DueSQL = dueSQL
