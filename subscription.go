package clouddb

import (
	"math"
	"net/netip"
	"strconv"
	"time"
)

// SubscriptionStatus is a subscription's provisioning state.
type SubscriptionStatus string

// Subscription states.
const (
	SubscriptionPending  SubscriptionStatus = "pending"
	SubscriptionActive   SubscriptionStatus = "active"
	SubscriptionDeleting SubscriptionStatus = "deleting"
	SubscriptionError    SubscriptionStatus = "error"
)

// MaxNonActiveSubscriptions is how many subscriptions of one account may be non-active at
// once; a request that would make one more fails its task.
const MaxNonActiveSubscriptions = 3

// Subscription is a group of databases sharing a payment method, a cloud placement and a
// capacity.
type Subscription struct {
	ID                              int
	AccountID                       int
	Name                            string
	Status                          SubscriptionStatus
	DeploymentType                  string
	PaymentMethodID                 int
	PaymentMethod                   string
	MemoryStorage                   string
	PublicEndpointAccess            bool
	PersistentStorageEncryptionType string
	RedisVersion                    string
	DeletionGracePeriod             string
	CloudProviders                  []CloudProvider
	// MaintenanceWindows and CIDRAllowlist are settings that change no server (see
	// subscription_settings.go).
	MaintenanceWindows MaintenanceWindows
	CIDRAllowlist      CIDRAllowlist
	// CapacityGB is the memory the subscription's "cluster" is sized for; see Capacity.
	CapacityGB float64
	// Generation counts the changes made to the subscription; the reconciler only settles a
	// status for the generation it saw.
	Generation int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// CloudProvider is where a subscription runs.
type CloudProvider struct {
	Provider       string   `json:"provider"`
	CloudAccountID int      `json:"cloudAccountId"`
	Regions        []Region `json:"regions"`
	ResourceTags   []Tag    `json:"resourceTags,omitempty"`
}

// Region is one region of a cloud provider entry.
type Region struct {
	Region                     string     `json:"region"`
	MultipleAvailabilityZones  bool       `json:"multipleAvailabilityZones"`
	PreferredAvailabilityZones []string   `json:"preferredAvailabilityZones"`
	Networking                 Networking `json:"networking"`
}

// Networking is a region's network placement.
type Networking struct {
	DeploymentCIDR string `json:"deploymentCIDR,omitempty"`
	VpcID          string `json:"vpcId,omitempty"`
}

// Tag is a key/value label.
type Tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// SubscriptionSpec is the body of a subscription create, as the task stores it.
type SubscriptionSpec struct {
	Name                            string          `json:"name"`
	DeploymentType                  string          `json:"deploymentType,omitempty"`
	DryRun                          bool            `json:"dryRun,omitempty"`
	PaymentMethodID                 int             `json:"paymentMethodId,omitempty"`
	PaymentMethod                   string          `json:"paymentMethod,omitempty"`
	MemoryStorage                   string          `json:"memoryStorage,omitempty"`
	CloudProviders                  []CloudProvider `json:"cloudProviders"`
	Databases                       []DatabaseSpec  `json:"databases"`
	RedisVersion                    string          `json:"redisVersion,omitempty"`
	PersistentStorageEncryptionType string          `json:"persistentStorageEncryptionType,omitempty"`
	PublicEndpointAccess            *bool           `json:"publicEndpointAccess,omitempty"`
}

// SubscriptionUpdate is the body of a subscription update (plain or customer-managed-key
// form). Nil fields mean "no change".
type SubscriptionUpdate struct {
	Name                 *string `json:"name,omitempty"`
	PaymentMethodID      *int    `json:"paymentMethodId,omitempty"`
	PaymentMethod        *string `json:"paymentMethod,omitempty"`
	PublicEndpointAccess *bool   `json:"publicEndpointAccess,omitempty"`
	DeletionGracePeriod  *string `json:"deletionGracePeriod,omitempty"`
	// ResourceTags replaces the tags of every cloud provider entry; only PUT
	// …/resource-tags sets it (an empty list clears them).
	ResourceTags *[]Tag `json:"resourceTags,omitempty"`
}

var (
	deploymentTypes      = []string{"single-region", "active-active"}
	paymentMethodKinds   = []string{"credit-card", "marketplace"}
	memoryStorages       = []string{"ram", "ram-and-flash"}
	encryptionTypes      = []string{"cloud-provider-managed-key", "customer-managed-key"}
	deletionGracePeriods = []string{"alerts-only", "immediate", "15-minutes", "30-minutes", "1-hour", "4-hours", "8-hours", "12-hours", "24-hours"}
)

// Validate checks the rules of a subscription create that need no stored state. Every
// creation-plan database is checked as a database create, except that it needs no
// password (one is generated).
func (s *SubscriptionSpec) Validate() error {
	if s.Name == "" {
		return Invalid(ErrTypeInvalidField, "subscription: name is required")
	}
	if err := checkText(subRes, "name", s.Name, MaxNameLength); err != nil {
		return err
	}
	if err := checkText(subRes, "redisVersion", s.RedisVersion, MaxShortText); err != nil {
		return err
	}
	if err := checkCount(subRes, "cloudProviders", len(s.CloudProviders), MaxListLength); err != nil {
		return err
	}
	if err := checkCount(subRes, "databases", len(s.Databases), MaxListLength); err != nil {
		return err
	}
	if s.DeploymentType != "" && s.DeploymentType != "single-region" {
		if !oneOf(s.DeploymentType, deploymentTypes) {
			return Invalid(ErrTypeInvalidField, "subscription: deploymentType must be one of %v", deploymentTypes)
		}
		return Invalid(ErrTypeNotImplemented, "subscription: deploymentType %q is not supported by clouddb; use single-region", s.DeploymentType)
	}
	if s.PaymentMethod != "" && !oneOf(s.PaymentMethod, paymentMethodKinds) {
		return Invalid(ErrTypeInvalidField, "subscription: paymentMethod must be one of %v", paymentMethodKinds)
	}
	if s.MemoryStorage != "" && !oneOf(s.MemoryStorage, memoryStorages) {
		return Invalid(ErrTypeInvalidField, "subscription: memoryStorage must be one of %v", memoryStorages)
	}
	if s.PersistentStorageEncryptionType != "" && !oneOf(s.PersistentStorageEncryptionType, encryptionTypes) {
		return Invalid(ErrTypeInvalidField, "subscription: persistentStorageEncryptionType must be one of %v", encryptionTypes)
	}
	if len(s.CloudProviders) == 0 {
		return Invalid(ErrTypeInvalidField, "subscription: cloudProviders needs at least one element")
	}
	for i, cp := range s.CloudProviders {
		if cp.Provider != "" && !ValidProvider(cp.Provider) {
			return Invalid(ErrTypeInvalidField, "subscription: cloudProviders[%d].provider must be one of %v", i, cloudProviders)
		}
		if len(cp.Regions) == 0 {
			return Invalid(ErrTypeInvalidField, "subscription: cloudProviders[%d].regions needs at least one element", i)
		}
		cpField := "cloudProviders[" + strconv.Itoa(i) + "]"
		if err := checkCount(subRes, cpField+".regions", len(cp.Regions), MaxListLength); err != nil {
			return err
		}
		if err := ValidateResourceTags(subRes, cpField+".resourceTags", cp.ResourceTags); err != nil {
			return err
		}
		for j, r := range cp.Regions {
			if r.Region == "" {
				return Invalid(ErrTypeInvalidField, "subscription: cloudProviders[%d].regions[%d].region is required", i, j)
			}
			if err := r.validateText(cpField + ".regions[" + strconv.Itoa(j) + "]"); err != nil {
				return err
			}
			if c := r.Networking.DeploymentCIDR; c != "" {
				if p, err := netip.ParsePrefix(c); err != nil || p.Masked() != p {
					return Invalid(ErrTypeInvalidCIDR, "subscription: cloudProviders[%d].regions[%d].networking.deploymentCIDR %q is not a CIDR block", i, j, c)
				}
			}
		}
	}
	if len(s.Databases) == 0 {
		return Invalid(ErrTypeNoDatabases, "subscription: databases needs at least one element")
	}
	names := map[string]bool{}
	for i := range s.Databases {
		d := &s.Databases[i]
		if err := d.validate(false); err != nil {
			e := AsError(err)
			e.Description = "subscription: databases[" + strconv.Itoa(i) + "]: " + e.Description
			return e
		}
		if len(d.ReplicaOf) > 0 {
			return Invalid(ErrTypeInvalidField, "subscription: databases[%d].replicaOf is not part of a creation plan: set it with a database update", i)
		}
		if d.Quantity < 0 || d.Quantity > 100 {
			return Invalid(ErrTypeInvalidField, "subscription: databases[%d].quantity must be between 1 and 100", i)
		}
		for _, n := range d.PlanNames() {
			if names[n] {
				return Conflict(ErrTypeDatabaseNameTaken, "subscription: database name %q is used twice", n)
			}
			names[n] = true
		}
	}
	return nil
}

// subRes names the resource in the errors of a subscription body.
const subRes = "subscription"

// validateText checks the strings of a region that are stored and shown.
func (r *Region) validateText(field string) error {
	if err := checkText(subRes, field+".region", r.Region, MaxShortText); err != nil {
		return err
	}
	if err := checkCount(subRes, field+".preferredAvailabilityZones", len(r.PreferredAvailabilityZones), MaxListLength); err != nil {
		return err
	}
	for k, z := range r.PreferredAvailabilityZones {
		if err := checkText(subRes, field+".preferredAvailabilityZones["+strconv.Itoa(k)+"]", z, MaxShortText); err != nil {
			return err
		}
	}
	return checkText(subRes, field+".networking.vpcId", r.Networking.VpcID, MaxShortText)
}

// Validate checks a subscription update.
func (u *SubscriptionUpdate) Validate() error {
	if u.Name != nil && *u.Name == "" {
		return Invalid(ErrTypeInvalidField, "subscription: name must be 1 to %d characters", MaxNameLength)
	}
	if u.Name != nil {
		if err := checkText(subRes, "name", *u.Name, MaxNameLength); err != nil {
			return err
		}
	}
	if u.PaymentMethod != nil && !oneOf(*u.PaymentMethod, paymentMethodKinds) {
		return Invalid(ErrTypeInvalidField, "subscription: paymentMethod must be one of %v", paymentMethodKinds)
	}
	if u.DeletionGracePeriod != nil && !oneOf(*u.DeletionGracePeriod, deletionGracePeriods) {
		return Invalid(ErrTypeInvalidField, "subscription: deletionGracePeriod must be one of %v", deletionGracePeriods)
	}
	if u.ResourceTags != nil {
		return ValidateResourceTags(subRes, "resourceTags", *u.ResourceTags)
	}
	return nil
}

// Apply copies the set fields of u onto s.
func (u *SubscriptionUpdate) Apply(s *Subscription) {
	if u.Name != nil {
		s.Name = *u.Name
	}
	if u.PaymentMethodID != nil {
		s.PaymentMethodID = *u.PaymentMethodID
	}
	if u.PaymentMethod != nil {
		s.PaymentMethod = *u.PaymentMethod
	}
	if u.PublicEndpointAccess != nil {
		s.PublicEndpointAccess = *u.PublicEndpointAccess
	}
	if u.DeletionGracePeriod != nil {
		s.DeletionGracePeriod = *u.DeletionGracePeriod
	}
	if u.ResourceTags != nil {
		tags := *u.ResourceTags
		if len(tags) == 0 {
			tags = nil // as a create without tags stores them
		}
		for i := range s.CloudProviders {
			s.CloudProviders[i].ResourceTags = tags
		}
	}
}

// Capacity sizing. A subscription is created with room for the databases of its creation
// plan: their summed sizes, rounded up to a whole GB. A database create that would make the
// summed sizes of the subscription's databases exceed that capacity resizes the
// subscription: its capacity becomes the larger of twice the old capacity and the new
// total rounded up, and the subscription is pending until the resize is provisioned.

// InitialCapacity returns the capacity a subscription is created with for the given total
// of database sizes.
func InitialCapacity(totalGB float64) float64 {
	return math.Max(1, math.Ceil(totalGB))
}

// GrownCapacity returns the capacity after a resize to hold needGB.
func GrownCapacity(capacityGB, needGB float64) float64 {
	return math.Max(2*capacityGB, math.Ceil(needGB))
}
