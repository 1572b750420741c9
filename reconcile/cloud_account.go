package reconcile

import (
	"context"
	"strconv"

	"clouddb"
)

func (r *Reconciler) cloudAccount(ctx context.Context, c *clouddb.CloudAccount) {
	key := "ca:" + strconv.Itoa(c.ID)
	switch c.Status {
	case clouddb.CloudAccountDraft, clouddb.CloudAccountChangeDraft:
		r.spawn(ctx, key, func(ctx context.Context) error {
			if !r.delay(ctx) {
				return nil
			}
			return r.update(ctx, func(tx clouddb.Tx) error {
				_, err := tx.SetCloudAccountStatus(ctx, c.ID, c.Generation, clouddb.CloudAccountActive)
				return err
			})
		}, func(ctx context.Context) { r.cloudAccountFailed(ctx, c) })
	case clouddb.CloudAccountDeleting:
		r.spawn(ctx, key, func(ctx context.Context) error {
			if !r.delay(ctx) {
				return nil
			}
			return r.update(ctx, func(tx clouddb.Tx) error { return ignoreGone(tx.DeleteCloudAccount(ctx, c.ID)) })
		}, nil) // a deletion is tried again: the user asked for it to go
	}
}

// cloudAccountFailed puts c in error after its provisioning panicked.
func (r *Reconciler) cloudAccountFailed(ctx context.Context, c *clouddb.CloudAccount) {
	err := r.update(ctx, func(tx clouddb.Tx) error {
		_, serr := tx.SetCloudAccountStatus(ctx, c.ID, c.Generation, clouddb.CloudAccountError)
		return serr
	})
	if err != nil {
		r.Logger.Error("mark cloud account failed", "cloud_account_id", c.ID, "err", err)
	}
}
