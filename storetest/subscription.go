package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func newSubscription(accountID, cloudAccountID int, name string) *clouddb.Subscription {
	return &clouddb.Subscription{
		AccountID:                       accountID,
		Name:                            name,
		Status:                          clouddb.SubscriptionPending,
		DeploymentType:                  "single-region",
		PaymentMethodID:                 7,
		PaymentMethod:                   "credit-card",
		MemoryStorage:                   "ram",
		PublicEndpointAccess:            true,
		PersistentStorageEncryptionType: "cloud-provider-managed-key",
		RedisVersion:                    "7.4",
		DeletionGracePeriod:             "alerts-only",
		CloudProviders: []clouddb.CloudProvider{{
			Provider:       "AWS",
			CloudAccountID: cloudAccountID,
			Regions: []clouddb.Region{{
				Region:                     "us-east-1",
				MultipleAvailabilityZones:  true,
				PreferredAvailabilityZones: []string{"use1-az1", "use1-az2"},
				Networking:                 clouddb.Networking{DeploymentCIDR: "10.0.0.0/24", VpcID: "vpc-1"},
			}},
			ResourceTags: []clouddb.Tag{{Key: "team", Value: "db"}},
		}},
		// Windows and days in an order that is not sorted: they read back as given.
		MaintenanceWindows: clouddb.MaintenanceWindows{Mode: "manual", Windows: []clouddb.MaintenanceWindow{
			{Days: []string{"Thursday", "Monday"}, StartHour: 22, DurationInHours: 6},
			{Days: []string{"Sunday"}, StartHour: 0, DurationInHours: 24},
		}},
		CIDRAllowlist: clouddb.CIDRAllowlist{CIDRIPs: []string{"10.1.0.0/16", "192.168.0.0/24"},
			SecurityGroupIDs: []string{"sg-0123456789abcdef0", "sg-01234567"}},
		CapacityGB: 2.5,
	}
}

func testSubscription(t *testing.T, open OpenFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		s := newSubscription(bn.a.ID, clouddb.InternalCloudAccountID, "sub")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateSubscription(bn.ctx, s) })
		require.NotZero(t, s.ID)
		require.Equal(t, 1, s.Generation)
		requireStamped(t, s.CreatedAt)
		require.Equal(t, s.CreatedAt, s.UpdatedAt)

		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.Subscription(bn.ctx, bn.a.ID, s.ID)
			require.NoError(t, err)
			require.Equal(t, s, got)
			require.Equal(t, "vpc-1", got.CloudProviders[0].Regions[0].Networking.VpcID)
			require.Equal(t, []string{"Thursday", "Monday"}, got.MaintenanceWindows.Windows[0].Days)
			require.Equal(t, []string{"sg-0123456789abcdef0", "sg-01234567"}, got.CIDRAllowlist.SecurityGroupIDs)

			got, err = tx.Subscription(bn.ctx, 0, s.ID)
			require.NoError(t, err, "account 0 sees every account")
			require.Equal(t, s, got)

			_, err = tx.Subscription(bn.ctx, bn.b.ID, s.ID)
			require.ErrorIs(t, err, clouddb.ErrNotFound, "another account's subscription is not found")
			_, err = tx.Subscription(bn.ctx, bn.a.ID, s.ID+1000)
			require.ErrorIs(t, err, clouddb.ErrNotFound)
			return nil
		})
	})

	t.Run("DefaultSettings", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		s := newSubscription(bn.a.ID, clouddb.InternalCloudAccountID, "sub")
		s.MaintenanceWindows, s.CIDRAllowlist = clouddb.MaintenanceWindows{}, clouddb.CIDRAllowlist{}
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateSubscription(bn.ctx, s) })
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.Subscription(bn.ctx, bn.a.ID, s.ID)
			require.NoError(t, err)
			require.Equal(t, s, got)
			require.Equal(t, clouddb.MaintenanceAutomatic, got.MaintenanceWindows.ModeOrDefault())
			require.Nil(t, got.MaintenanceWindows.Windows)
			require.Nil(t, got.CIDRAllowlist.CIDRIPs)
			return nil
		})
		// Set, then cleared again: nothing of the old settings is left.
		s.MaintenanceWindows = clouddb.MaintenanceWindows{Mode: "manual", Windows: []clouddb.MaintenanceWindow{{Days: []string{"Friday"}, StartHour: 1, DurationInHours: 4}}}
		s.CIDRAllowlist = clouddb.CIDRAllowlist{SecurityGroupIDs: []string{"sg-89abcdef"}}
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateSubscription(bn.ctx, s) })
		s.MaintenanceWindows = clouddb.MaintenanceWindows{Mode: "automatic"}
		s.CIDRAllowlist = clouddb.CIDRAllowlist{}
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateSubscription(bn.ctx, s) })
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.Subscription(bn.ctx, bn.a.ID, s.ID)
			require.NoError(t, err)
			require.Equal(t, s, got)
			return nil
		})
	})

	t.Run("Filter", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		c := newCloudAccount(bn.a.ID, "ca")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateCloudAccount(bn.ctx, c) })
		a1 := newSubscription(bn.a.ID, clouddb.InternalCloudAccountID, "a1")
		b1 := newSubscription(bn.b.ID, clouddb.InternalCloudAccountID, "b1")
		a2 := newSubscription(bn.a.ID, c.ID, "a2")
		a2.Status = clouddb.SubscriptionActive
		a3 := newSubscription(bn.a.ID, clouddb.InternalCloudAccountID, "a3")
		a3.Status = clouddb.SubscriptionDeleting
		a3.CloudProviders = append(a3.CloudProviders, clouddb.CloudProvider{
			Provider: "AWS", CloudAccountID: c.ID, Regions: []clouddb.Region{{Region: "eu-west-1"}},
		})
		bn.update(t, func(tx clouddb.Tx) error {
			for _, s := range []*clouddb.Subscription{a1, b1, a2, a3} {
				require.NoError(t, tx.CreateSubscription(bn.ctx, s))
			}
			return nil
		})
		list := func(f clouddb.SubscriptionFilter) []*clouddb.Subscription {
			var out []*clouddb.Subscription
			bn.view(t, func(tx clouddb.Tx) error {
				var err error
				out, err = tx.Subscriptions(bn.ctx, f)
				return err
			})
			return out
		}
		require.Equal(t, []*clouddb.Subscription{a1, a2, a3}, list(clouddb.SubscriptionFilter{AccountID: bn.a.ID}))
		require.Equal(t, []*clouddb.Subscription{b1}, list(clouddb.SubscriptionFilter{AccountID: bn.b.ID}))
		require.Equal(t, []*clouddb.Subscription{a1, b1, a2, a3}, list(clouddb.SubscriptionFilter{}))
		require.Equal(t, []*clouddb.Subscription{a2, a3}, list(clouddb.SubscriptionFilter{
			AccountID: bn.a.ID,
			Statuses:  []clouddb.SubscriptionStatus{clouddb.SubscriptionActive, clouddb.SubscriptionDeleting},
		}))
		// Any cloud provider entry of a subscription matches.
		require.Equal(t, []*clouddb.Subscription{a2, a3}, list(clouddb.SubscriptionFilter{CloudAccountID: c.ID}))
		require.Equal(t, []*clouddb.Subscription{a1, a3}, list(clouddb.SubscriptionFilter{
			AccountID: bn.a.ID, CloudAccountID: clouddb.InternalCloudAccountID,
		}))
		require.Empty(t, list(clouddb.SubscriptionFilter{AccountID: bn.b.ID, CloudAccountID: c.ID}))
	})

	t.Run("UpdateDelete", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		s := newSubscription(bn.a.ID, clouddb.InternalCloudAccountID, "sub")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateSubscription(bn.ctx, s) })

		upd := *s
		upd.Name = "renamed"
		upd.Status = clouddb.SubscriptionActive
		upd.PaymentMethodID = 8
		upd.PublicEndpointAccess = false
		upd.DeletionGracePeriod = "immediate"
		upd.CapacityGB = 5
		upd.CloudProviders = []clouddb.CloudProvider{{Provider: "GCP", CloudAccountID: 1, Regions: []clouddb.Region{{Region: "europe-west1"}}}}
		upd.MaintenanceWindows = clouddb.MaintenanceWindows{Mode: "manual", Windows: []clouddb.MaintenanceWindow{
			{Days: []string{"Saturday"}, StartHour: 3, DurationInHours: 8}}}
		upd.CIDRAllowlist = clouddb.CIDRAllowlist{CIDRIPs: []string{"172.16.0.0/12"}}
		upd.Generation = 5 // the caller owns the generation
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateSubscription(bn.ctx, &upd) })
		require.Equal(t, s.CreatedAt, upd.CreatedAt)
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.Subscription(bn.ctx, bn.a.ID, s.ID)
			require.NoError(t, err)
			require.Equal(t, &upd, got)
			return nil
		})

		missing := *s
		missing.ID += 1000
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateSubscription(bn.ctx, &missing) }), clouddb.ErrNotFound)

		// A subscription with database rows cannot be deleted.
		d := newDatabase(&upd, "db1", 10001)
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateDatabase(bn.ctx, d) })
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteSubscription(bn.ctx, s.ID) }), clouddb.ErrConflict)

		bn.update(t, func(tx clouddb.Tx) error {
			require.NoError(t, tx.DeleteDatabase(bn.ctx, d.ID))
			return tx.DeleteSubscription(bn.ctx, s.ID)
		})
		bn.view(t, func(tx clouddb.Tx) error {
			_, err := tx.Subscription(bn.ctx, bn.a.ID, s.ID)
			require.ErrorIs(t, err, clouddb.ErrNotFound)
			return nil
		})
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteSubscription(bn.ctx, s.ID) }), clouddb.ErrNotFound)
	})

	t.Run("SetStatus", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		s := newSubscription(bn.a.ID, clouddb.InternalCloudAccountID, "sub")
		bn.update(t, func(tx clouddb.Tx) error {
			require.NoError(t, tx.CreateSubscription(bn.ctx, s))
			s.Generation = 2
			return tx.UpdateSubscription(bn.ctx, s)
		})
		bn.update(t, func(tx clouddb.Tx) error {
			ok, err := tx.SetSubscriptionStatus(bn.ctx, s.ID, 1, clouddb.SubscriptionActive)
			require.NoError(t, err)
			require.False(t, ok, "a stale generation changes nothing")
			return nil
		})
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.Subscription(bn.ctx, bn.a.ID, s.ID)
			require.NoError(t, err)
			require.Equal(t, s, got)
			return nil
		})
		bn.update(t, func(tx clouddb.Tx) error {
			ok, err := tx.SetSubscriptionStatus(bn.ctx, s.ID, 2, clouddb.SubscriptionActive)
			require.NoError(t, err)
			require.True(t, ok)
			return nil
		})
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.Subscription(bn.ctx, bn.a.ID, s.ID)
			require.NoError(t, err)
			require.Equal(t, clouddb.SubscriptionActive, got.Status)
			require.Equal(t, 2, got.Generation)
			return nil
		})
	})
}
