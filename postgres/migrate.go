package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"slices"

	"github.com/jackc/pgx/v5"
)

// migrate applies the embedded migrations (migration/*.sql, in name order) that are not
// recorded in schema_migrations, each in its own transaction together with the row that
// records it, so a crash never leaves one half applied. It runs on a connection of its
// own under a session advisory lock, so that replicas starting at once apply each
// migration once; closing the connection releases the lock whatever happened.
func migrate(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return err
	}
	if _, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		name       text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return err
	}
	names, err := fs.Glob(migrationFS, "migration/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		if err := migrateFile(ctx, conn, name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func migrateFile(ctx context.Context, conn *pgx.Conn, name string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE name = $1)`, name).
			Scan(&done); err != nil || done {
			return err
		}
		buf, err := fs.ReadFile(migrationFS, name)
		if err != nil {
			return err
		}
		// Without arguments pgx sends the file as one simple query, which may hold many
		// statements.
		if _, err = tx.Exec(ctx, string(buf)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO schema_migrations (name) VALUES ($1)`, name)
		return err
	})
}
