package sqlite

import "context"

// Setting reads a value the service keeps for itself.
func (tx *Tx) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := tx.tx.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v)
	return v, mapErr(err)
}

// PutSetting writes a setting, replacing any value it had.
func (tx *Tx) PutSetting(ctx context.Context, name, value string) error {
	_, err := tx.tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value)
	return mapErr(err)
}
