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
			return r.Store.Update(ctx, func(tx clouddb.Tx) error {
				_, err := tx.SetCloudAccountStatus(ctx, c.ID, c.Generation, clouddb.CloudAccountActive)
				return err
			})
		})
	case clouddb.CloudAccountDeleting:
		r.spawn(ctx, key, func(ctx context.Context) error {
			if !r.delay(ctx) {
				return nil
			}
			return r.Store.Update(ctx, func(tx clouddb.Tx) error { return ignoreGone(tx.DeleteCloudAccount(ctx, c.ID)) })
		})
	}
}
