package clouddb

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
)

// The settings of a subscription that change no server: its maintenance windows, the tags
// of its cloud resources and its CIDR allow list. clouddb stores them and reads them back
// as they were sent; it neither schedules maintenance nor filters connections by them.

// Error types of the subscription settings, from the Redis Cloud API's catalogue.
const (
	ErrTypeMaintenanceManualWithoutWindows = "MAINTENANCE_WINDOW_MANUAL_MODE_WITH_NO_MAINTENANCE_WINDOWS"
	ErrTypeMaintenanceAutomaticWithWindows = "MAINTENANCE_WINDOW_AUTOMATIC_MODE_WITH_MAINTENANCE_WINDOWS"
	ErrTypeMaintenanceStartHour            = "MAINTENANCE_WINDOW_INVALID_START_HOUR"
	ErrTypeMaintenanceDuration             = "MAINTENANCE_WINDOW_INVALID_DURATION_IN_HOURS"
	ErrTypeMaintenanceDays                 = "MAINTENANCE_WINDOW_INVALID_DAYS"
	ErrTypeMaintenanceDuplicateDays        = "MAINTENANCE_WINDOW_DUPLICATE_DAYS"
	ErrTypeMaintenanceTooManyWindows       = "MAINTENANCE_WINDOW_GREATER_THAN_MAXIMUM_ALLOWABLE_MAINTENANCE_WINDOWS_PROVIDED"
	ErrTypeMaintenanceRoFDuration          = "MAINTENANCE_WINDOW_INVALID_DURATION_FOR_ROF_SUBSCRIPTION"

	ErrTypeResourceTagsDuplicateKey = "RESOURCE_TAGS_DUPLICATE_KEY"
	ErrTypeResourceTagsEmptyKey     = "RESOURCE_TAGS_EMPTY_KEY"
	ErrTypeResourceTagsMissingValue = "RESOURCE_TAGS_MISSING_VALUE"
	ErrTypeResourceTagsTooMany      = "RESOURCE_TAGS_EXCEEDS_MAXIMUM_COUNT"

	ErrTypeCIDRNotAllowed    = "CIDR_WHITELIST_NOT_ALLOWED"
	ErrTypeCIDRInvalid       = "CIDR_WHITELIST_INVALID_CIDRS"
	ErrTypeCIDRInvalidSG     = "CIDR_WHITELIST_INVALID_SG"
	ErrTypeCIDRDuplicate     = "CIDR_WHITELIST_DUPLICATE_CIDRS"
	ErrTypeCIDRDuplicateSG   = "CIDR_WHITELIST_DUPLICATE_SG"
	ErrTypeCIDRLimitExceeded = "CIDR_WHITELIST_LIMIT_EXCEEDED"
)

// The resources named in the errors, and the two messages the real API is known to send
// (its clients' tests match them).
const (
	cidrRes                   = "cidr allow list"
	maintenanceRes            = "maintenance windows"
	maintenanceManualNoWindow = "Must provide at least one maintenance window with manual maintenance mode"
	maintenanceAutoWithWindow = "Automatic mode cannot be set with a manual maintenance window"
)

// Maintenance modes.
const (
	MaintenanceAutomatic = "automatic"
	MaintenanceManual    = "manual"
)

// Maintenance window limits.
const (
	MaxMaintenanceWindows = 7
	// A window lasts 4 to 24 hours, at least 8 on a ram-and-flash subscription.
	MinMaintenanceHours    = 4
	MinMaintenanceHoursRoF = 8
	MaxMaintenanceHours    = 24
)

// weekdays are the day names a maintenance window takes, as the API spells them.
var weekdays = []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// MaintenanceWindows is a subscription's maintenance schedule. The zero value is the
// schedule of a new subscription: automatic, no windows.
type MaintenanceWindows struct {
	Mode    string              `json:"mode,omitempty"`
	Windows []MaintenanceWindow `json:"windows,omitempty"`
}

// ModeOrDefault is the mode, automatic when none was ever set.
func (m MaintenanceWindows) ModeOrDefault() string {
	if m.Mode == "" {
		return MaintenanceAutomatic
	}
	return m.Mode
}

// MaintenanceWindow is one weekly window: from StartHour (the region's local time) for
// DurationInHours on each of Days, kept in the order given.
type MaintenanceWindow struct {
	Days            []string `json:"days"`
	StartHour       int      `json:"startHour"`
	DurationInHours int      `json:"durationInHours"`
}

// MaintenanceWindowsUpdate is the body of PUT /subscriptions/{id}/maintenance-windows.
// The numbers are pointers so that a window without one is refused rather than read as 0.
type MaintenanceWindowsUpdate struct {
	Mode    *string                   `json:"mode,omitempty"`
	Windows []MaintenanceWindowUpdate `json:"windows,omitempty"`
}

// MaintenanceWindowUpdate is one window of a MaintenanceWindowsUpdate.
type MaintenanceWindowUpdate struct {
	Days            []string `json:"days,omitempty"`
	StartHour       *int     `json:"startHour,omitempty"`
	DurationInHours *int     `json:"durationInHours,omitempty"`
}

// Validate checks the body for a subscription of the given memoryStorage and returns the
// schedule to store, windows and days in the order sent.
func (u *MaintenanceWindowsUpdate) Validate(memoryStorage string) (MaintenanceWindows, error) {
	var out MaintenanceWindows
	switch {
	case u.Mode == nil:
		return out, Invalid(ErrTypeInvalidField, "%s: mode is required: %s or %s", maintenanceRes, MaintenanceAutomatic, MaintenanceManual)
	case *u.Mode == MaintenanceManual && len(u.Windows) == 0:
		return out, Invalid(ErrTypeMaintenanceManualWithoutWindows, maintenanceManualNoWindow)
	case *u.Mode == MaintenanceAutomatic && len(u.Windows) > 0:
		return out, Invalid(ErrTypeMaintenanceAutomaticWithWindows, maintenanceAutoWithWindow)
	case *u.Mode != MaintenanceAutomatic && *u.Mode != MaintenanceManual:
		return out, Invalid(ErrTypeInvalidField, "%s: mode must be %s or %s, got %q", maintenanceRes, MaintenanceAutomatic, MaintenanceManual, *u.Mode)
	case len(u.Windows) > MaxMaintenanceWindows:
		return out, Invalid(ErrTypeMaintenanceTooManyWindows, "%s: at most %d windows may be set, got %d", maintenanceRes, MaxMaintenanceWindows, len(u.Windows))
	}
	minHours := MinMaintenanceHours
	if memoryStorage == "ram-and-flash" {
		minHours = MinMaintenanceHoursRoF
	}
	out.Mode = *u.Mode
	for i, w := range u.Windows {
		f := "windows[" + strconv.Itoa(i) + "]"
		switch {
		case w.StartHour == nil:
			return MaintenanceWindows{}, Invalid(ErrTypeMaintenanceStartHour, "%s: %s.startHour is required (0 to 23)", maintenanceRes, f)
		case *w.StartHour < 0 || *w.StartHour > 23:
			return MaintenanceWindows{}, Invalid(ErrTypeMaintenanceStartHour, "%s: %s.startHour must be an hour from 0 to 23, got %d", maintenanceRes, f, *w.StartHour)
		case w.DurationInHours == nil:
			return MaintenanceWindows{}, Invalid(ErrTypeMaintenanceDuration, "%s: %s.durationInHours is required (%d to %d)", maintenanceRes, f, minHours, MaxMaintenanceHours)
		case *w.DurationInHours < MinMaintenanceHours || *w.DurationInHours > MaxMaintenanceHours:
			return MaintenanceWindows{}, Invalid(ErrTypeMaintenanceDuration, "%s: %s.durationInHours must be from %d to %d hours, got %d",
				maintenanceRes, f, MinMaintenanceHours, MaxMaintenanceHours, *w.DurationInHours)
		case *w.DurationInHours < minHours:
			return MaintenanceWindows{}, Invalid(ErrTypeMaintenanceRoFDuration, "%s: %s.durationInHours must be from %d to %d hours on a ram-and-flash subscription, got %d",
				maintenanceRes, f, minHours, MaxMaintenanceHours, *w.DurationInHours)
		case len(w.Days) == 0:
			return MaintenanceWindows{}, Invalid(ErrTypeMaintenanceDays, "%s: %s.days needs at least one day (%v)", maintenanceRes, f, weekdays)
		}
		seen := make(map[string]bool, len(w.Days))
		for j, d := range w.Days {
			if !oneOf(d, weekdays) {
				return MaintenanceWindows{}, Invalid(ErrTypeMaintenanceDays, "%s: %s.days[%d] %q is not one of %v", maintenanceRes, f, j, d, weekdays)
			}
			if seen[d] {
				return MaintenanceWindows{}, Invalid(ErrTypeMaintenanceDuplicateDays, "%s: %s.days has %s twice", maintenanceRes, f, d)
			}
			seen[d] = true
		}
		out.Windows = append(out.Windows, MaintenanceWindow{Days: w.Days, StartHour: *w.StartHour, DurationInHours: *w.DurationInHours})
	}
	return out, nil
}

// ValidateResourceTags checks the resource tags of a subscription (set at create or with
// PUT …/resource-tags): at most MaxTags, each with a key given once and a value, within
// the lengths and characters of every tag (see ValidateTags).
func ValidateResourceTags(resource, field string, tags []Tag) error {
	if len(tags) > MaxTags {
		return Invalid(ErrTypeResourceTagsTooMany, "%s: %s may hold at most %d elements, got %d", resource, field, MaxTags, len(tags))
	}
	seen := make(map[string]bool, len(tags))
	for i, t := range tags {
		f := fmt.Sprintf("%s[%d]", field, i)
		if t.Key == "" {
			return Invalid(ErrTypeResourceTagsEmptyKey, "%s: %s.key is required", resource, f)
		}
		if err := checkText(resource, f+".key", t.Key, MaxTagKeyLength); err != nil {
			return err
		}
		if t.Value == "" {
			return Invalid(ErrTypeResourceTagsMissingValue, "%s: %s.value is required (tag %q)", resource, f, t.Key)
		}
		if err := checkText(resource, f+".value", t.Value, MaxTagValueLength); err != nil {
			return err
		}
		if seen[t.Key] {
			return Invalid(ErrTypeResourceTagsDuplicateKey, "%s: %s.key %q is given twice", resource, f, t.Key)
		}
		seen[t.Key] = true
	}
	return nil
}

// MaxCIDRAllowlist bounds a CIDR allow list: its CIDRs and security groups together, as
// each would be one inbound rule of the subscription's security group.
const MaxCIDRAllowlist = 32

// securityGroupID is an AWS security group id: sg- and 8 or 17 hex digits.
var securityGroupID = regexp.MustCompile(`^sg-(?:[0-9a-f]{8}|[0-9a-f]{17})$`)

// CIDRAllowlist is the VPC-wide allow list of a subscription on a customer cloud account:
// the networks and AWS security groups it admits. It is also the body of PUT
// /subscriptions/{id}/cidr, which replaces the whole list (an absent list is empty).
type CIDRAllowlist struct {
	CIDRIPs          []string `json:"cidrIps,omitempty"`
	SecurityGroupIDs []string `json:"securityGroupIds,omitempty"`
}

// CheckCIDRAllowed refuses a subscription that has its resources in the service's
// internal cloud account: the allow list belongs to a customer's own VPC.
func CheckCIDRAllowed(s *Subscription) error {
	for _, cp := range s.CloudProviders {
		if cp.CloudAccountID == InternalCloudAccountID {
			return Invalid(ErrTypeCIDRNotAllowed, "%s: subscription %d runs in the internal cloud account (id %d); the CIDR allow list is for subscriptions of your own cloud account",
				cidrRes, s.ID, InternalCloudAccountID)
		}
	}
	return nil
}

// Validate checks the list for subscription s: CIDR blocks and AWS security group ids,
// each given once, at most MaxCIDRAllowlist in all, security groups on AWS only.
func (l *CIDRAllowlist) Validate(s *Subscription) error {
	if err := CheckCIDRAllowed(s); err != nil {
		return err
	}
	if n := len(l.CIDRIPs) + len(l.SecurityGroupIDs); n > MaxCIDRAllowlist {
		return Invalid(ErrTypeCIDRLimitExceeded, "%s: cidrIps and securityGroupIds may hold at most %d entries together, got %d", cidrRes, MaxCIDRAllowlist, n)
	}
	seen := make(map[netip.Prefix]int, len(l.CIDRIPs))
	for i, c := range l.CIDRIPs {
		p, err := netip.ParsePrefix(c)
		if err != nil || p.Masked() != p {
			return Invalid(ErrTypeCIDRInvalid, "%s: cidrIps[%d] %q is not a CIDR block (e.g. 10.0.0.0/16)", cidrRes, i, c)
		}
		if j, dup := seen[p]; dup {
			return Invalid(ErrTypeCIDRDuplicate, "%s: cidrIps[%d] %q is cidrIps[%d] again", cidrRes, i, c, j)
		}
		seen[p] = i
	}
	if len(l.SecurityGroupIDs) > 0 {
		for _, cp := range s.CloudProviders {
			if cp.Provider != "" && cp.Provider != "AWS" {
				return Invalid(ErrTypeCIDRInvalidSG, "%s: security groups exist on AWS only; subscription %d runs on %s", cidrRes, s.ID, cp.Provider)
			}
		}
	}
	sgs := make(map[string]int, len(l.SecurityGroupIDs))
	for i, g := range l.SecurityGroupIDs {
		if !securityGroupID.MatchString(g) {
			return Invalid(ErrTypeCIDRInvalidSG, "%s: securityGroupIds[%d] %q is not a security group id (sg- and 8 or 17 hex digits)", cidrRes, i, g)
		}
		if j, dup := sgs[g]; dup {
			return Invalid(ErrTypeCIDRDuplicateSG, "%s: securityGroupIds[%d] %q is securityGroupIds[%d] again", cidrRes, i, g, j)
		}
		sgs[g] = i
	}
	return nil
}
