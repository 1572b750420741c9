package task

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"clouddb"
)

func decode(t *clouddb.Task, v any) error {
	if err := json.Unmarshal(t.Payload, v); err != nil {
		return clouddb.Invalid(clouddb.ErrTypeMalformedBody, "task payload: %v", err)
	}
	return nil
}

func findSubscription(ctx context.Context, tx clouddb.Tx, accountID, id int) (*clouddb.Subscription, error) {
	s, err := tx.Subscription(ctx, accountID, id)
	if errors.Is(err, clouddb.ErrNotFound) || (err == nil && s.Status == clouddb.SubscriptionDeleting) {
		return nil, clouddb.NotFound(clouddb.ErrTypeSubscriptionNotFound, "subscription %d not found", id)
	}
	return s, err
}

func requireActive(s *clouddb.Subscription) error {
	if s.Status != clouddb.SubscriptionActive {
		return clouddb.Forbidden(clouddb.ErrTypeSubscriptionNotActive, "subscription %d is %s; wait until it is active", s.ID, s.Status)
	}
	return nil
}

// checkNonActiveLimit fails when one more non-active subscription would exceed the limit.
func checkNonActiveLimit(ctx context.Context, tx clouddb.Tx, accountID int) error {
	subs, err := tx.Subscriptions(ctx, clouddb.SubscriptionFilter{AccountID: accountID})
	if err != nil {
		return err
	}
	n := 0
	for _, s := range subs {
		if s.Status != clouddb.SubscriptionActive {
			n++
		}
	}
	if n >= clouddb.MaxNonActiveSubscriptions {
		return clouddb.Errorf(http.StatusTooManyRequests, clouddb.ErrTypeSubscriptionLimit,
			"%d subscriptions are already not active; at most %d may be at once: wait for them to become active", n, clouddb.MaxNonActiveSubscriptions)
	}
	return nil
}

func checkPaymentMethod(ctx context.Context, tx clouddb.Tx, accountID, id int) error {
	pms, err := tx.PaymentMethods(ctx, accountID)
	if err != nil {
		return err
	}
	for _, pm := range pms {
		if pm.ID == id {
			return nil
		}
	}
	if id == 0 {
		return clouddb.Invalid(clouddb.ErrTypePaymentNotFound, "subscription: paymentMethodId is required (see GET /payment-methods)")
	}
	return clouddb.Invalid(clouddb.ErrTypePaymentNotFound, "subscription: payment method %d was not found for this account (see GET /payment-methods)", id)
}

func createSubscription(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var spec clouddb.SubscriptionSpec
	if err := decode(t, &spec); err != nil {
		return 0, err
	}
	for i := range spec.Databases {
		spec.Databases[i].UseCurrentSizeRule()
	}
	if err := spec.Validate(); err != nil {
		return 0, err
	}
	if err := planVersions(v.versions(), &spec); err != nil {
		return 0, err
	}
	publicAccess := spec.PublicEndpointAccess == nil || *spec.PublicEndpointAccess
	for i := range spec.Databases {
		if len(spec.Databases[i].SourceIPs) == 0 {
			spec.Databases[i].SourceIPs = clouddb.DefaultSourceIPs(publicAccess)
		}
	}
	if spec.PaymentMethod != "marketplace" {
		if err := checkPaymentMethod(ctx, tx, t.AccountID, spec.PaymentMethodID); err != nil {
			return 0, err
		}
	}
	for i, cp := range spec.CloudProviders {
		ca, err := tx.CloudAccount(ctx, t.AccountID, cp.CloudAccountID)
		if errors.Is(err, clouddb.ErrNotFound) || (err == nil && ca.Status == clouddb.CloudAccountDeleting) {
			return 0, clouddb.NotFound(clouddb.ErrTypeCloudAccountNotFound, "subscription: cloudProviders[%d].cloudAccountId %d was not found for this account (see GET /cloud-accounts)", i, cp.CloudAccountID)
		} else if err != nil {
			return 0, err
		}
		if spec.CloudProviders[i].Provider == "" {
			spec.CloudProviders[i].Provider = ca.Provider
		}
	}
	if err := checkNonActiveLimit(ctx, tx, t.AccountID); err != nil {
		return 0, err
	}
	if spec.DryRun {
		// Every check of a real create, and nothing written.
		if err := admitPlan(ctx, v, tx, spec.Databases); err != nil {
			return 0, err
		}
		var names []string
		for _, d := range spec.Databases {
			names = append(names, d.PlanNames()...)
		}
		v.resource = dryRunPricing(names...)
		return 0, nil
	}
	var total float64
	for _, d := range spec.Databases {
		total += d.SizeGB() * float64(max(d.Quantity, 1))
	}
	sub := &clouddb.Subscription{
		AccountID:                       t.AccountID,
		Name:                            spec.Name,
		Status:                          clouddb.SubscriptionPending,
		DeploymentType:                  "single-region",
		PaymentMethodID:                 spec.PaymentMethodID,
		PaymentMethod:                   orDefault(spec.PaymentMethod, "credit-card"),
		MemoryStorage:                   orDefault(spec.MemoryStorage, "ram"),
		PublicEndpointAccess:            publicAccess,
		PersistentStorageEncryptionType: orDefault(spec.PersistentStorageEncryptionType, "cloud-provider-managed-key"),
		RedisVersion:                    spec.RedisVersion,
		CloudProviders:                  spec.CloudProviders,
		CapacityGB:                      clouddb.InitialCapacity(total),
		Generation:                      1,
	}
	if err := tx.CreateSubscription(ctx, sub); err != nil {
		return 0, err
	}
	for _, d := range spec.Databases {
		for _, name := range d.PlanNames() {
			ds := d
			ds.Name = name
			ds.Quantity = 0
			ds.DryRun = false
			password := ds.Password
			if password == "" {
				password = generatePassword()
			}
			ds.Password = ""
			if _, err := insertDatabase(ctx, v, tx, sub, ds, password, nil); err != nil {
				return 0, err
			}
		}
	}
	if err := v.log(ctx, clouddb.LogTypeSubscription, sub.Name, sub.ID, "Subscription %q (id %d) created", sub.Name, sub.ID); err != nil {
		return 0, err
	}
	return sub.ID, nil
}

func updateSubscription(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var u clouddb.SubscriptionUpdate
	if err := decode(t, &u); err != nil {
		return 0, err
	}
	if err := u.Validate(); err != nil {
		return 0, err
	}
	sub, err := findSubscription(ctx, tx, t.AccountID, t.SubscriptionID)
	if err != nil {
		return 0, err
	}
	if err := requireActive(sub); err != nil {
		return 0, err
	}
	if u.PaymentMethodID != nil {
		if err := checkPaymentMethod(ctx, tx, t.AccountID, *u.PaymentMethodID); err != nil {
			return 0, err
		}
	}
	if err := checkNonActiveLimit(ctx, tx, t.AccountID); err != nil {
		return 0, err
	}
	u.Apply(sub)
	// An update is a metadata change of the cluster: pending until provisioned.
	sub.Status = clouddb.SubscriptionPending
	sub.Generation++
	if err := tx.UpdateSubscription(ctx, sub); err != nil {
		return 0, err
	}
	return sub.ID, v.log(ctx, clouddb.LogTypeSubscription, sub.Name, sub.ID, "Subscription %q (id %d) updated", sub.Name, sub.ID)
}

func deleteSubscription(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	sub, err := findSubscription(ctx, tx, t.AccountID, t.SubscriptionID)
	if err != nil {
		return 0, err
	}
	_, n, err := tx.Databases(ctx, clouddb.DatabaseFilter{SubscriptionID: sub.ID, ExcludeDeleting: true, Limit: 1})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		return 0, clouddb.Conflict(clouddb.ErrTypeSubscriptionNotEmpty, "subscription %d still has %d database(s); delete them first", sub.ID, n)
	}
	if sub.Status == clouddb.SubscriptionActive {
		if err := checkNonActiveLimit(ctx, tx, t.AccountID); err != nil {
			return 0, err
		}
	}
	sub.Status = clouddb.SubscriptionDeleting
	sub.Generation++
	if err := tx.UpdateSubscription(ctx, sub); err != nil {
		return 0, err
	}
	return sub.ID, v.log(ctx, clouddb.LogTypeSubscription, sub.Name, sub.ID, "Subscription %q (id %d) deleted", sub.Name, sub.ID)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// generatePassword makes a password for a creation-plan database, which carries none:
// 26 characters of base32, 128 random bits.
func generatePassword() string { return rand.Text() }

// planVersions sets the Redis version of each creation-plan database: its own
// redisVersion if it has one, else the subscription's (deprecated) redisVersion, where
// "latest" is the newest offered, else the default.
func planVersions(versions clouddb.RedisVersions, spec *clouddb.SubscriptionSpec) error {
	subVersion, err := versions.SubscriptionVersion(spec.RedisVersion)
	if err != nil {
		return err
	}
	for i := range spec.Databases {
		d := &spec.Databases[i]
		if d.RedisVersion == "" && subVersion != "" {
			d.RedisVersion = subVersion
			continue
		}
		if d.RedisVersion, err = versions.DatabaseVersion(d.RedisVersion); err != nil {
			e := clouddb.AsError(err)
			e.Description = "subscription: databases[" + strconv.Itoa(i) + "]: " + e.Description
			return e
		}
	}
	return nil
}

// admitPlan checks, for a dry run, what inserting the plan's databases would: that they
// fit the host's memory together and that each port asked for is free (once).
func admitPlan(ctx context.Context, v *env, tx clouddb.Tx, plan []clouddb.DatabaseSpec) error {
	var need int64
	ports := map[int]bool{}
	for _, d := range plan {
		for range d.PlanNames() {
			need += footprint(&d)
			if ports[d.Port] {
				if d.Port == 0 {
					continue // one free port is checked for all the others
				}
				return clouddb.Conflict("DATABASE_PORT_IN_USE", "database: port %d is already in use", d.Port)
			}
			ports[d.Port] = true
			if _, err := v.Ports.Allocate(ctx, tx, d.Port); err != nil {
				return err
			}
		}
	}
	return reserveMemory(ctx, v, tx, 0, need)
}
