package browser_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestErrorBody(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("Validation", func(t *testing.T) {
		res := b.post(t, "/api/db/", map[string]any{"name": "n", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": "6379"})
		requireStatus(t, res, http.StatusBadRequest)
		require.Equal(t, map[string]any{
			"statusCode": float64(400),
			"error":      "Bad Request",
			"code":       "INVALID_FIELD",
			"message":    "port: must be an integer from 1 to 65535",
			"field":      "port",
		}, res.body)
	})

	t.Run("MalformedBody", func(t *testing.T) {
		res := b.post(t, "/api/db/", `{"name":`)
		requireStatus(t, res, http.StatusBadRequest)
		require.Equal(t, "Bad Request", res.body["error"])
		require.Equal(t, "MALFORMED_BODY", res.body["code"])
		require.NotContains(t, res.body, "field")
	})

	t.Run("NotFound", func(t *testing.T) {
		res := b.get(t, "/api/db/999")
		requireStatus(t, res, http.StatusNotFound)
		require.Equal(t, map[string]any{
			"statusCode": float64(404),
			"error":      "Not Found",
			"code":       "CONNECTION_NOT_FOUND",
			"message":    "no database connection with id 999",
		}, res.body)
	})
}

func TestCertificateNameInUse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ca := newCA(t, "ca")
	cert, key := ca.valid(t, "client")
	const msg = "This client certificate name is already in use."
	inUse := func(field string) map[string]any {
		return map[string]any{"statusCode": float64(400), "error": "Bad Request", "code": "CERTIFICATE_NAME_TAKEN", "message": msg, "field": field}
	}
	record := func(name string) map[string]any {
		return map[string]any{"name": "db", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": 6379,
			"tls": map[string]any{"useTls": true, "clientAuth": true, "clientCertificateKeyPair": map[string]any{
				"new": map[string]any{"name": name, "cert": cert, "key": key}}}}
	}

	t.Run("PostedTwice", func(t *testing.T) {
		b.createCert(t, "posted", cert, key)
		res := b.post(t, "/api/tls-client-cert/", map[string]any{"name": "posted", "cert": cert, "key": key})
		requireStatus(t, res, http.StatusBadRequest)
		require.Equal(t, inUse("name"), res.body)
		require.Equal(t, []string{"posted"}, b.certNames(t))
	})

	t.Run("PostedThenInline", func(t *testing.T) {
		for _, q := range []string{"", "?test=false"} {
			before := b.connectionCount(t)
			res := b.post(t, "/api/db/"+q, record("posted"))
			requireStatus(t, res, http.StatusBadRequest)
			require.Equal(t, inUse("tls.clientCertificateKeyPair.new.name"), res.body)
			require.Equal(t, before, b.connectionCount(t), "nothing is stored")
		}
	})

	t.Run("InlineThenPosted", func(t *testing.T) {
		requireStatus(t, b.post(t, "/api/db/?test=false", record("inline")), http.StatusCreated)
		res := b.post(t, "/api/tls-client-cert/", map[string]any{"name": "inline", "cert": cert, "key": key})
		requireStatus(t, res, http.StatusBadRequest)
		require.Equal(t, inUse("name"), res.body)
		require.ElementsMatch(t, []string{"posted", "inline"}, b.certNames(t))
	})

	t.Run("InlineTwice", func(t *testing.T) {
		before := b.connectionCount(t)
		res := b.post(t, "/api/db/?test=false", record("inline"))
		requireStatus(t, res, http.StatusBadRequest)
		require.Equal(t, inUse("tls.clientCertificateKeyPair.new.name"), res.body)
		require.Equal(t, before, b.connectionCount(t), "nothing is stored")
	})
}
