package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
)

const azureBlockSize = 8 << 20

type azureTarget struct {
	client          *azblob.Client
	container, blob string
}

func parseAzure(op *call) (*azureTarget, error) {
	o := op.opts
	u, err := parseURL(op.uri)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	user, key, _ := userinfo(u)
	op.secret(key)
	op.secret(o.AzureKey)
	if key == "" {
		key = o.AzureKey
	}
	var account, serviceURL string
	if isEndpointAuthority(u) {
		// abs://ACCOUNT:KEY@host:port/container/blob: an Azure-compatible endpoint, path-style.
		account = user
		if account == "" {
			return nil, fmt.Errorf("%w: an abs:// URI with an endpoint needs the account name as its user name", ErrInvalid)
		}
		secure, paramErr := secureParam(q, defaultSecure(u))
		if paramErr != nil {
			return nil, paramErr
		}
		scheme := "http"
		if secure {
			scheme = "https"
		}
		serviceURL = scheme + "://" + u.Host + "/" + url.PathEscape(account)
	} else {
		// abs://:KEY@ACCOUNT/container/blob
		account = u.Hostname()
		if account == "" {
			return nil, fmt.Errorf("%w: no storage account in the URI", ErrInvalid)
		}
		if o.AzureEndpoint != "" {
			ep, secure, epErr := endpointOf(o.AzureEndpoint)
			if epErr != nil {
				return nil, epErr
			}
			scheme := "http"
			if secure {
				scheme = "https"
			}
			serviceURL = scheme + "://" + ep + "/" + url.PathEscape(account)
		} else {
			serviceURL = "https://" + account + ".blob.core.windows.net"
		}
	}
	su, err := url.Parse(serviceURL)
	if err != nil {
		return nil, fmt.Errorf("%w: Azure endpoint", ErrInvalid)
	}
	if err = CheckHost(su.Hostname()); err != nil {
		return nil, err
	}
	container, blob, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if container == "" {
		return nil, fmt.Errorf("%w: no container in the URI", ErrInvalid)
	}
	copts := &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: o.transport()},
		Retry: policy.RetryOptions{
			MaxRetries:    2,
			RetryDelay:    200 * time.Millisecond,
			MaxRetryDelay: time.Second,
		},
		Telemetry: policy.TelemetryOptions{Disabled: true},
	}}
	var client *azblob.Client
	if key == "" {
		client, err = azblob.NewClientWithNoCredential(serviceURL, copts)
	} else {
		cred, cerr := azblob.NewSharedKeyCredential(account, key)
		if cerr != nil {
			return nil, fmt.Errorf("%w: the account key is not valid base64", ErrAuth)
		}
		client, err = azblob.NewClientWithSharedKeyCredential(serviceURL, cred, copts)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: Azure client: %v", ErrInvalid, err)
	}
	return &azureTarget{client: client, container: container, blob: blob}, nil
}

// azureErr maps Azure storage errors to the sentinels. Its messages carry only the status
// and error code: the SDK's own message quotes whole requests and responses.
func azureErr(err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return err
	}
	code := re.ErrorCode
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound, bloberror.ResourceNotFound):
		return fmt.Errorf("%w: Azure %d %s", ErrNotFound, re.StatusCode, code)
	case bloberror.HasCode(err, bloberror.AuthenticationFailed, bloberror.AuthorizationFailure,
		bloberror.InvalidAuthenticationInfo, bloberror.AuthorizationPermissionMismatch,
		bloberror.AuthorizationResourceTypeMismatch, bloberror.NoAuthenticationInformation):
		return fmt.Errorf("%w: Azure %d %s", ErrAuth, re.StatusCode, code)
	}
	switch re.StatusCode {
	case 404:
		return fmt.Errorf("%w: Azure %d %s", ErrNotFound, re.StatusCode, code)
	case 401, 403:
		return fmt.Errorf("%w: Azure %d %s", ErrAuth, re.StatusCode, code)
	case 502, 503, 504:
		return fmt.Errorf("%w: Azure %d %s", ErrUnreachable, re.StatusCode, code)
	}
	return fmt.Errorf("Azure %d %s", re.StatusCode, code) //nolint:staticcheck // ST1005: "Azure" is a proper noun, like "S3" in s3Err
}

func openAzure(ctx context.Context, op *call) (io.ReadCloser, int64, error) {
	t, err := parseAzure(op)
	if err != nil {
		return nil, 0, err
	}
	if t.blob == "" || strings.HasSuffix(t.blob, "/") {
		return nil, 0, fmt.Errorf("%w: no blob name in the URI", ErrInvalid)
	}
	resp, err := t.client.DownloadStream(ctx, t.container, t.blob, nil)
	if err != nil {
		return nil, 0, azureErr(err)
	}
	size := int64(-1)
	if resp.ContentLength != nil {
		size = *resp.ContentLength
	}
	return resp.Body, size, nil
}

func putAzure(ctx context.Context, op *call, name string, r io.Reader) (string, error) {
	t, err := parseAzure(op)
	if err != nil {
		return "", err
	}
	blob := joinKey(t.blob, name)
	// Blocks are staged, then committed at once: the blob appears whole or not at all.
	_, err = t.client.UploadStream(ctx, t.container, blob, r, &azblob.UploadStreamOptions{
		BlockSize:   azureBlockSize,
		Concurrency: 2,
	})
	if err != nil {
		return "", azureErr(err)
	}
	return locationOf(op.uri, name), nil
}
