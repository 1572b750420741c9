package reconcile

import (
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// A driver call under way with one set of users holds back every settlement on what the
// server had before: with a provisioning delay, a call made for older rows (user U still
// there) may land after U was deleted, so the server must not count as without U until
// that call has ended and a new one has applied the current rows.
func TestUsersInFlightHoldSettling(t *testing.T) {
	r := &Reconciler{}
	r.init()
	without := clouddb.Instance{DatabaseID: 7}
	with := clouddb.Instance{DatabaseID: 7, Users: []clouddb.DatabaseUser{{Name: "u", Password: "U.pa55word", Rule: "+@read ~*"}}}

	r.noteUsers(7, without, nil)
	require.True(t, r.usersApplied(7, without))

	r.usersInFlight(7, with) // a call made from older rows, with u
	require.False(t, r.usersApplied(7, without), "the server may get u back until the call ends")
	require.True(t, r.users[7].names["u"], "u may be on the server")

	r.noteUsers(7, with, nil) // the old call ends: the server has u
	require.False(t, r.usersApplied(7, without))
	r.usersInFlight(7, without)
	r.noteUsers(7, without, nil) // the current rows applied
	require.True(t, r.usersApplied(7, without))

	// Nothing known of a database: a call under way makes nothing up.
	r.usersInFlight(8, with)
	_, known := r.users[8]
	require.False(t, known)
}
