package task

import (
	"context"
	"errors"

	"clouddb"
)

func findCloudAccount(ctx context.Context, tx clouddb.Tx, t *clouddb.Task) (*clouddb.CloudAccount, error) {
	if t.CloudAccountID == clouddb.InternalCloudAccountID {
		return nil, clouddb.Forbidden(clouddb.ErrTypeCloudAccountInternal, "cloud account %d is the service's internal account and cannot be changed", t.CloudAccountID)
	}
	c, err := tx.CloudAccount(ctx, t.AccountID, t.CloudAccountID)
	if errors.Is(err, clouddb.ErrNotFound) || (err == nil && c.Status == clouddb.CloudAccountDeleting) {
		return nil, clouddb.NotFound(clouddb.ErrTypeCloudAccountNotFound, "cloud account %d not found", t.CloudAccountID)
	}
	return c, err
}

func createCloudAccount(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var spec clouddb.CloudAccountSpec
	if err := decode(t, &spec); err != nil {
		return 0, err
	}
	if err := spec.ValidateCreate(); err != nil {
		return 0, err
	}
	c := &clouddb.CloudAccount{AccountID: t.AccountID, Status: clouddb.CloudAccountDraft, Generation: 1}
	spec.Apply(c)
	if err := tx.CreateCloudAccount(ctx, c); err != nil {
		return 0, err
	}
	return c.ID, v.log(ctx, clouddb.LogTypeCloudAccount, c.Name, c.ID, "Cloud account %q (id %d) created", c.Name, c.ID)
}

func updateCloudAccount(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var spec clouddb.CloudAccountSpec
	if err := decode(t, &spec); err != nil {
		return 0, err
	}
	c, err := findCloudAccount(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	if err := spec.ValidateUpdate(); err != nil {
		return 0, err
	}
	spec.Apply(c)
	c.Status = clouddb.CloudAccountChangeDraft
	c.Generation++
	if err := tx.UpdateCloudAccount(ctx, c); err != nil {
		return 0, err
	}
	return c.ID, v.log(ctx, clouddb.LogTypeCloudAccount, c.Name, c.ID, "Cloud account %q (id %d) updated", c.Name, c.ID)
}

func deleteCloudAccount(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	c, err := findCloudAccount(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	subs, err := tx.Subscriptions(ctx, clouddb.SubscriptionFilter{AccountID: t.AccountID, CloudAccountID: c.ID})
	if err != nil {
		return 0, err
	}
	if len(subs) > 0 {
		return 0, clouddb.Conflict(clouddb.ErrTypeCloudAccountInUse, "cloud account %d is used by subscription %d; delete its subscriptions first", c.ID, subs[0].ID)
	}
	c.Status = clouddb.CloudAccountDeleting
	c.Generation++
	if err := tx.UpdateCloudAccount(ctx, c); err != nil {
		return 0, err
	}
	return c.ID, v.log(ctx, clouddb.LogTypeCloudAccount, c.Name, c.ID, "Cloud account %q (id %d) deleted", c.Name, c.ID)
}
