package cloudapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// A cloud account's access key id reads back exactly as sent (an identifier Terraform
// keeps in its state), in the GET and in the list; the secret key and the console
// password never do.
func TestCloudAccountAccessKeyIDExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	const (
		keyID    = "AKIAIOSFODNN7EXAMPLE"
		secret   = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
		password = "console-pass-4f9a"
	)
	body := cloudAccountBody("exact")
	body.AccessKeyID, body.AccessSecretKey, body.ConsolePassword = client.Ptr(keyID), client.Ptr(secret), client.Ptr(password)
	tk, err := e.main.Wait(ctx)(e.main.CreateCloudAccount(ctx, body))
	require.NoError(t, err)
	id := tk.ResourceID()
	ca, err := e.main.GetCloudAccount(ctx, id)
	require.NoError(t, err)
	require.Equal(t, keyID, ca.AccessKeyID)
	list, err := e.main.ListCloudAccounts(ctx)
	require.NoError(t, err)
	require.Len(t, list.CloudAccounts, 2)
	require.Equal(t, keyID, list.CloudAccounts[1].AccessKeyID)
	require.Empty(t, list.CloudAccounts[0].AccessKeyID, "the internal account has none")
	for _, path := range []string{fmt.Sprintf("/v1/cloud-accounts/%d", id), "/v1/cloud-accounts"} {
		res := e.do(http.MethodGet, path, mainKey, mainSecret, nil)
		require.Equal(t, http.StatusOK, res.status)
		require.Contains(t, string(res.body), `"accessKeyId":"`+keyID+`"`)
		for _, hidden := range []string{secret, "wJalrXUtnFEMI", password, "accessSecretKey", "consolePassword"} {
			require.NotContains(t, string(res.body), hidden, path)
		}
	}
	// An update's new key id reads back as sent too; the secret stays encrypted at rest.
	_, err = e.main.Wait(ctx)(e.main.UpdateCloudAccount(ctx, id, client.UpdateCloudAccount{AccessKeyID: client.Ptr("AKIANEWKEY0000000001")}))
	require.NoError(t, err)
	ca, err = e.main.GetCloudAccount(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "AKIANEWKEY0000000001", ca.AccessKeyID)
}
