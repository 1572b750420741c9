package cloudapi

import (
	"encoding/json"
	"net/http"

	"clouddb"
)

// The subscription settings: maintenance windows, resource tags and the CIDR allow list.
// The handlers check the shape of a body; the rules (the catalogued MAINTENANCE_WINDOW_*,
// RESOURCE_TAGS_* and CIDR_WHITELIST_* errors) are the task's, as for every other body.

type maintenanceWindowsView struct {
	Mode string `json:"mode"`
	// Windows is left out when there are none: a new subscription reads
	// {"mode":"automatic"}, and the clients read an absent list as empty.
	Windows []maintenanceWindowView `json:"windows,omitempty"`
}

type maintenanceWindowView struct {
	StartHour       int      `json:"startHour"`
	DurationInHours int      `json:"durationInHours"`
	Days            []string `json:"days"`
}

// getMaintenanceWindows answers what was set, windows and days in the order sent.
func (s *Server) getMaintenanceWindows(r *http.Request, c *caller) (int, any, error) {
	sub, _, err := s.withSubscription(r, c)
	if err != nil {
		return 0, nil, err
	}
	mw := sub.MaintenanceWindows
	v := maintenanceWindowsView{Mode: mw.ModeOrDefault()}
	for _, w := range mw.Windows {
		v.Windows = append(v.Windows, maintenanceWindowView{StartHour: w.StartHour, DurationInHours: w.DurationInHours, Days: nonNil(w.Days)})
	}
	return http.StatusOK, v, nil
}

func (s *Server) updateMaintenanceWindows(r *http.Request, c *caller) (int, any, error) {
	sub, _, err := s.withSubscription(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body clouddb.MaintenanceWindowsUpdate
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandMaintenanceWindowsUpdate, SubscriptionID: sub.ID}, body)
}

// resourceTagsBody is the body of PUT …/resource-tags. The official client always sends
// the key: null (a nil list) and [] both clear the tags; a body without it is refused.
type resourceTagsBody struct {
	ResourceTags optionalTags `json:"resourceTags"`
}

// optionalTags records whether its key was present, null included.
type optionalTags struct {
	set  bool
	tags []clouddb.Tag
}

func (o *optionalTags) UnmarshalJSON(b []byte) error {
	o.set = true
	return json.Unmarshal(b, &o.tags)
}

// updateResourceTags replaces the tags of the subscription's cloud resources with a
// subscription update, as the real API does (commandType subscriptionUpdateRequest).
func (s *Server) updateResourceTags(r *http.Request, c *caller) (int, any, error) {
	sub, _, err := s.withSubscription(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body resourceTagsBody
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if !body.ResourceTags.set {
		return 0, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "field resourceTags is required ([] or null clears the tags)")
	}
	tags := nonNil(body.ResourceTags.tags)
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandSubscriptionUpdate, SubscriptionID: sub.ID},
		clouddb.SubscriptionUpdate{ResourceTags: &tags})
}

// getCIDRAllowlist answers, like the real API, with a task whose response.resource is
// the allow list.
func (s *Server) getCIDRAllowlist(r *http.Request, c *caller) (int, any, error) {
	sub, _, err := s.withSubscription(r, c)
	if err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandCIDRGet, SubscriptionID: sub.ID}, nil)
}

// updateCIDRAllowlist replaces the whole allow list: a list the body leaves out is
// emptied (Terraform clears the allow list with {}).
func (s *Server) updateCIDRAllowlist(r *http.Request, c *caller) (int, any, error) {
	sub, _, err := s.withSubscription(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body clouddb.CIDRAllowlist
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandCIDRUpdate, SubscriptionID: sub.ID}, body)
}
