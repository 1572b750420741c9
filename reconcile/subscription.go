package reconcile

import (
	"context"
	"strconv"

	"clouddb"
)

func (r *Reconciler) subscription(ctx context.Context, s *clouddb.Subscription, dbs []*clouddb.Database) {
	key := "sub:" + strconv.Itoa(s.ID)
	switch s.Status {
	case clouddb.SubscriptionPending:
		for _, d := range dbs {
			if d.Status != clouddb.DatabaseDeleting && !d.Status.Settled() {
				return // its databases first
			}
		}
		r.spawn(ctx, key, func(ctx context.Context) error {
			if !r.delay(ctx) {
				return nil
			}
			var set bool
			err := r.update(ctx, func(tx clouddb.Tx) error {
				var err error
				set, err = tx.SetSubscriptionStatus(ctx, s.ID, s.Generation, clouddb.SubscriptionActive)
				return err
			})
			if err == nil && set {
				r.event(ctx, s.AccountID, clouddb.LogTypeSubscription, s.Name, s.ID, "Subscription %q (id %d) is active", s.Name, s.ID)
			}
			return err
		}, func(ctx context.Context) { r.subscriptionFailed(ctx, s) })
	case clouddb.SubscriptionDeleting:
		if len(dbs) > 0 {
			return // wait until its databases are gone
		}
		r.spawn(ctx, key, func(ctx context.Context) error {
			if !r.delay(ctx) {
				return nil
			}
			return r.update(ctx, func(tx clouddb.Tx) error { return ignoreGone(tx.DeleteSubscription(ctx, s.ID)) })
		}, nil) // a deletion is tried again: the user asked for it to go
	}
}

// subscriptionFailed puts s in error after its provisioning panicked.
func (r *Reconciler) subscriptionFailed(ctx context.Context, s *clouddb.Subscription) {
	err := r.update(ctx, func(tx clouddb.Tx) error {
		_, serr := tx.SetSubscriptionStatus(ctx, s.ID, s.Generation, clouddb.SubscriptionError)
		return serr
	})
	if err != nil {
		r.Logger.Error("mark subscription failed", "subscription_id", s.ID, "err", err)
	}
}
