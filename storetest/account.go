package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func testAccount(t *testing.T, open OpenFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		require.NotZero(t, bn.a.ID)
		require.NotEqual(t, bn.a.ID, bn.b.ID)
		requireStamped(t, bn.a.CreatedAt)
		require.Equal(t, bn.a.CreatedAt, bn.a.UpdatedAt)

		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.Account(bn.ctx, bn.a.ID)
			require.NoError(t, err)
			require.Equal(t, bn.a, got)

			all, err := tx.Accounts(bn.ctx)
			require.NoError(t, err)
			require.Equal(t, []*clouddb.Account{bn.a, bn.b}, all)

			_, err = tx.Account(bn.ctx, bn.b.ID+1000)
			require.ErrorIs(t, err, clouddb.ErrNotFound)
			return nil
		})
	})

	t.Run("PresetTimes", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		// A preset time in another zone is kept as the same instant, in UTC.
		created := base.In(time.FixedZone("X", 3600))
		a := &clouddb.Account{Name: "C", Plan: clouddb.PlanFixed, CreatedAt: created, UpdatedAt: created.Add(time.Second)}
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateAccount(bn.ctx, a) })
		require.Equal(t, base, a.CreatedAt)

		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.Account(bn.ctx, a.ID)
			require.NoError(t, err)
			require.Equal(t, a, got)
			require.Equal(t, base, got.CreatedAt)
			require.Equal(t, base.Add(time.Second), got.UpdatedAt)
			require.Equal(t, time.UTC, got.CreatedAt.Location())
			return nil
		})
	})

	t.Run("APIKey", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		k := &clouddb.APIKey{
			AccountID:    bn.a.ID,
			Name:         "ci",
			Key:          "key-1",
			SecretDigest: clouddb.DigestSecret("secret"),
			Role:         clouddb.RoleOwner,
		}
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateAPIKey(bn.ctx, k) })
		require.NotZero(t, k.ID)
		requireStamped(t, k.CreatedAt)

		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.APIKey(bn.ctx, "key-1")
			require.NoError(t, err)
			require.Equal(t, k, got)
			require.True(t, got.MatchSecret("secret"))

			_, err = tx.APIKey(bn.ctx, "key-2")
			require.ErrorIs(t, err, clouddb.ErrNotFound)
			return nil
		})

		// The key string is unique, across accounts too.
		err := bn.tryUpdate(func(tx clouddb.Tx) error {
			return tx.CreateAPIKey(bn.ctx, &clouddb.APIKey{
				AccountID: bn.b.ID, Name: "other", Key: "key-1",
				SecretDigest: clouddb.DigestSecret("x"), Role: clouddb.RoleViewer,
			})
		})
		require.ErrorIs(t, err, clouddb.ErrConflict)
	})

	t.Run("APIKeysListAndDelete", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		key := func(accountID int, name string) *clouddb.APIKey {
			return &clouddb.APIKey{AccountID: accountID, Name: name, Key: "key-" + name, SecretDigest: clouddb.DigestSecret(name), Role: clouddb.RoleViewer}
		}
		a1, b1, a2 := key(bn.a.ID, "a1"), key(bn.b.ID, "b1"), key(bn.a.ID, "a2")
		bn.update(t, func(tx clouddb.Tx) error {
			for _, k := range []*clouddb.APIKey{a1, b1, a2} {
				require.NoError(t, tx.CreateAPIKey(bn.ctx, k))
			}
			return nil
		})
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.APIKeys(bn.ctx, bn.a.ID)
			require.NoError(t, err)
			require.Equal(t, []*clouddb.APIKey{a1, a2}, got)
			got, err = tx.APIKeys(bn.ctx, 0)
			require.NoError(t, err)
			require.Equal(t, []*clouddb.APIKey{a1, b1, a2}, got, "0 lists every account's, by id")
			got, err = tx.APIKeys(bn.ctx, bn.b.ID+1000)
			require.NoError(t, err)
			require.Empty(t, got)
			return nil
		})

		bn.update(t, func(tx clouddb.Tx) error { return tx.DeleteAPIKey(bn.ctx, "key-a1") })
		bn.view(t, func(tx clouddb.Tx) error {
			_, err := tx.APIKey(bn.ctx, "key-a1")
			require.ErrorIs(t, err, clouddb.ErrNotFound, "a deleted key is not found")
			got, err := tx.APIKeys(bn.ctx, 0)
			require.NoError(t, err)
			require.Equal(t, []*clouddb.APIKey{b1, a2}, got, "only that key is gone")
			return nil
		})
		err := bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteAPIKey(bn.ctx, "key-a1") })
		require.ErrorIs(t, err, clouddb.ErrNotFound, "deleting a missing key")
	})

	t.Run("PaymentMethods", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		pm := func(accountID, ends int) *clouddb.PaymentMethod {
			return &clouddb.PaymentMethod{
				AccountID: accountID, Type: "Visa", CreditCardEndsWith: ends,
				NameOnCard: "Jo Doe", ExpirationMonth: 12, ExpirationYear: 2031,
			}
		}
		a1, b1, a2 := pm(bn.a.ID, 1111), pm(bn.b.ID, 2222), pm(bn.a.ID, 3333)
		bn.update(t, func(tx clouddb.Tx) error {
			for _, p := range []*clouddb.PaymentMethod{a1, b1, a2} {
				require.NoError(t, tx.CreatePaymentMethod(bn.ctx, p))
				require.NotZero(t, p.ID)
			}
			return nil
		})
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.PaymentMethods(bn.ctx, bn.a.ID)
			require.NoError(t, err)
			require.Equal(t, []*clouddb.PaymentMethod{a1, a2}, got)

			got, err = tx.PaymentMethods(bn.ctx, bn.b.ID)
			require.NoError(t, err)
			require.Equal(t, []*clouddb.PaymentMethod{b1}, got)
			return nil
		})
	})
}
