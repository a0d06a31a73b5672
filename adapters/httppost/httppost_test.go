package httppost_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/httppost"
)

func TestJSON_PostsTheBodyWithItsHeadersAndTakesAny2xxAsDelivered(t *testing.T) {
	var got struct {
		method, contentType, key, body string
	}
	status := http.StatusAccepted
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.contentType, got.key, got.body = r.Method, r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), string(b)
		w.WriteHeader(status)
	}))
	defer srv.Close()

	err := httppost.JSON(context.Background(), srv.Client(), srv.URL, []byte(`{"a":1}`), http.Header{"Idempotency-Key": {"m1"}})
	require.NoError(t, err)
	assert.Equal(t, http.MethodPost, got.method)
	assert.Equal(t, "application/json", got.contentType)
	assert.Equal(t, "m1", got.key)
	assert.Equal(t, `{"a":1}`, got.body)

	status = http.StatusServiceUnavailable
	err = httppost.JSON(context.Background(), srv.Client(), srv.URL, []byte(`{}`), nil)
	assert.ErrorContains(t, err, "503")
}
