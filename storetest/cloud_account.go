package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func newCloudAccount(accountID int, name string) *clouddb.CloudAccount {
	return &clouddb.CloudAccount{
		AccountID:       accountID,
		Name:            name,
		Provider:        "GCP",
		Status:          clouddb.CloudAccountDraft,
		AccessKeyID:     "AKIA" + name,
		AccessSecretKey: "secret-" + name,
		ConsoleUsername: "user-" + name,
		ConsolePassword: "pass-" + name,
		SignInLoginURL:  "https://signin.example.com/" + name,
	}
}

func testCloudAccount(t *testing.T, open OpenFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		require.Equal(t, clouddb.InternalCloudAccountID, bn.internal.ID)
		c := newCloudAccount(bn.a.ID, "ca")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateCloudAccount(bn.ctx, c) })
		require.NotZero(t, c.ID)
		require.NotEqual(t, clouddb.InternalCloudAccountID, c.ID)
		require.Equal(t, 1, c.Generation)
		requireStamped(t, c.CreatedAt)
		require.Equal(t, c.CreatedAt, c.UpdatedAt)

		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.CloudAccount(bn.ctx, bn.a.ID, c.ID)
			require.NoError(t, err)
			require.Equal(t, c, got)

			got, err = tx.CloudAccount(bn.ctx, bn.a.ID, clouddb.InternalCloudAccountID)
			require.NoError(t, err)
			require.Equal(t, bn.internal, got)
			require.Zero(t, got.AccountID)
			return nil
		})

		// The internal id is taken.
		err := bn.tryUpdate(func(tx clouddb.Tx) error {
			return tx.CreateCloudAccount(bn.ctx, &clouddb.CloudAccount{ID: clouddb.InternalCloudAccountID, Name: "x"})
		})
		require.ErrorIs(t, err, clouddb.ErrConflict)
	})

	t.Run("Scoping", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		ca := newCloudAccount(bn.a.ID, "a1")
		cb := newCloudAccount(bn.b.ID, "b1")
		ca2 := newCloudAccount(bn.a.ID, "a2")
		ca2.Status = clouddb.CloudAccountActive
		bn.update(t, func(tx clouddb.Tx) error {
			for _, c := range []*clouddb.CloudAccount{ca, cb, ca2} {
				require.NoError(t, tx.CreateCloudAccount(bn.ctx, c))
			}
			return nil
		})
		bn.view(t, func(tx clouddb.Tx) error {
			_, err := tx.CloudAccount(bn.ctx, bn.b.ID, ca.ID)
			require.ErrorIs(t, err, clouddb.ErrNotFound)
			got, err := tx.CloudAccount(bn.ctx, bn.b.ID, clouddb.InternalCloudAccountID)
			require.NoError(t, err)
			require.Equal(t, bn.internal, got)
			got, err = tx.CloudAccount(bn.ctx, 0, cb.ID)
			require.NoError(t, err)
			require.Equal(t, cb, got)
			_, err = tx.CloudAccount(bn.ctx, bn.a.ID, cb.ID+1000)
			require.ErrorIs(t, err, clouddb.ErrNotFound)

			list, err := tx.CloudAccounts(bn.ctx, clouddb.CloudAccountFilter{AccountID: bn.a.ID})
			require.NoError(t, err)
			require.Equal(t, []*clouddb.CloudAccount{bn.internal, ca, ca2}, list)

			list, err = tx.CloudAccounts(bn.ctx, clouddb.CloudAccountFilter{AccountID: bn.b.ID})
			require.NoError(t, err)
			require.Equal(t, []*clouddb.CloudAccount{bn.internal, cb}, list)

			list, err = tx.CloudAccounts(bn.ctx, clouddb.CloudAccountFilter{})
			require.NoError(t, err)
			require.Equal(t, []*clouddb.CloudAccount{bn.internal, ca, cb, ca2}, list)

			list, err = tx.CloudAccounts(bn.ctx, clouddb.CloudAccountFilter{
				AccountID: bn.a.ID, Statuses: []clouddb.CloudAccountStatus{clouddb.CloudAccountActive},
			})
			require.NoError(t, err)
			require.Equal(t, []*clouddb.CloudAccount{bn.internal, ca2}, list)
			return nil
		})
	})

	t.Run("UpdateDelete", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		c := newCloudAccount(bn.a.ID, "ca")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateCloudAccount(bn.ctx, c) })

		upd := *c
		upd.Name = "renamed"
		upd.Status = clouddb.CloudAccountChangeDraft
		upd.AccessKeyID, upd.AccessSecretKey = "AKIA2", "secret2"
		upd.ConsoleUsername, upd.ConsolePassword, upd.SignInLoginURL = "u2", "p2", "https://x/2"
		upd.Generation = 5 // the caller owns the generation
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateCloudAccount(bn.ctx, &upd) })
		require.Equal(t, c.CreatedAt, upd.CreatedAt)
		require.False(t, upd.UpdatedAt.Before(c.UpdatedAt))
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.CloudAccount(bn.ctx, bn.a.ID, c.ID)
			require.NoError(t, err)
			require.Equal(t, &upd, got)
			return nil
		})

		missing := *c
		missing.ID += 1000
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateCloudAccount(bn.ctx, &missing) }), clouddb.ErrNotFound)

		bn.update(t, func(tx clouddb.Tx) error { return tx.DeleteCloudAccount(bn.ctx, c.ID) })
		bn.view(t, func(tx clouddb.Tx) error {
			_, err := tx.CloudAccount(bn.ctx, bn.a.ID, c.ID)
			require.ErrorIs(t, err, clouddb.ErrNotFound)
			return nil
		})
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteCloudAccount(bn.ctx, c.ID) }), clouddb.ErrNotFound)
	})

	t.Run("SetStatus", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		c := newCloudAccount(bn.a.ID, "ca")
		bn.update(t, func(tx clouddb.Tx) error {
			require.NoError(t, tx.CreateCloudAccount(bn.ctx, c))
			c.Generation = 2
			return tx.UpdateCloudAccount(bn.ctx, c)
		})
		bn.update(t, func(tx clouddb.Tx) error {
			ok, err := tx.SetCloudAccountStatus(bn.ctx, c.ID, 1, clouddb.CloudAccountActive)
			require.NoError(t, err)
			require.False(t, ok, "a stale generation changes nothing")
			ok, err = tx.SetCloudAccountStatus(bn.ctx, c.ID+1000, 1, clouddb.CloudAccountActive)
			require.NoError(t, err)
			require.False(t, ok, "a missing row changes nothing")
			return nil
		})
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.CloudAccount(bn.ctx, bn.a.ID, c.ID)
			require.NoError(t, err)
			require.Equal(t, c, got)
			return nil
		})
		bn.update(t, func(tx clouddb.Tx) error {
			ok, err := tx.SetCloudAccountStatus(bn.ctx, c.ID, 2, clouddb.CloudAccountActive)
			require.NoError(t, err)
			require.True(t, ok)
			return nil
		})
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.CloudAccount(bn.ctx, bn.a.ID, c.ID)
			require.NoError(t, err)
			require.Equal(t, clouddb.CloudAccountActive, got.Status)
			require.Equal(t, 2, got.Generation, "a status change is not a new generation")
			return nil
		})
	})
}
