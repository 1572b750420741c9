package local_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// The driver's clients read with 4 KiB buffers: replies many times that size (ACL LIST
// of a few hundred users with long rules, INFO) are read whole, whether on their own or
// in a pipeline, by a start's check, a fresh driver's adoption (the full
// reconfiguration), the deep check of Running and SetUsers.
func TestDriver_LargeRepliesReadWhole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const id = 1
	in := b.instance(t, id, "none")
	for i := range 300 {
		in.Users = append(in.Users, clouddb.DatabaseUser{
			Name:     fmt.Sprintf("user-%03d-%s", i, strings.Repeat("n", 40)),
			Password: fmt.Sprintf("Passw0rd-%03d", i),
			Rule:     fmt.Sprintf("+@read +@write ~tenant:%03d:%s:* ~other:%03d:*", i, strings.Repeat("k", 60), i),
		})
	}
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	requireRunning(t, b.driver, in, true)

	fresh := mustDriver(t, b.dir) // learns every user from ACL LIST
	requireRunning(t, fresh, in, true)
	require.NoError(t, fresh.Ensure(ctxT(t), in))

	fresh2 := mustDriver(t, b.dir)
	requireRunning(t, fresh2, in, true)
	in.Users[0].Password = "Changed-passw0rd"
	require.NoError(t, fresh2.SetUsers(ctxT(t), in))
	u := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(in.Port), Username: in.Users[0].Name, Password: "Changed-passw0rd", Protocol: 2, DisableIdentity: true})
	defer u.Close()
	require.ErrorIs(t, u.Get(ctxT(t), "tenant:000:"+strings.Repeat("k", 60)+":x").Err(), redis.Nil, "the new password logs in")

	st, err := fresh2.Stats(ctxT(t), in)
	require.NoError(t, err)
	require.NotZero(t, st)
}
