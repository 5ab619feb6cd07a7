// Command goproxy is the reverse proxy a user would otherwise write in front of a worker's API
// server, the baseline mkpolicy's sidecar is measured against (bench/sidecar.py --real): the
// standard library's httputil.ReverseProxy, TLS on both legs, the client's bearer token checked
// and swapped for the worker's own credentials (a client certificate, as the test peers' admin
// kubeconfigs have), nothing parsed or transformed.
//
//	goproxy -listen 127.0.0.1:8443 -cert tls.crt -key tls.key -token-file token \
//	        -upstream https://127.0.0.1:6443 -upstream-ca ca.crt -upstream-cert c.crt -upstream-key c.key
package main

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"
)

func readTrimmed(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatalf("goproxy: %v", err)
	}
	return strings.TrimSpace(string(data))
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve HTTPS on")
	certFile := flag.String("cert", "", "serving certificate (PEM)")
	keyFile := flag.String("key", "", "serving key (PEM)")
	tokenFile := flag.String("token-file", "", "the bearer token clients must present")
	upstreamURL := flag.String("upstream", "", "the worker API server's URL")
	upstreamCA := flag.String("upstream-ca", "", "the worker API server's CA (PEM)")
	upstreamCert := flag.String("upstream-cert", "", "the worker's client certificate (PEM)")
	upstreamKey := flag.String("upstream-key", "", "the worker's client key (PEM)")
	flag.Parse()
	if *certFile == "" || *keyFile == "" || *tokenFile == "" || *upstreamURL == "" || *upstreamCA == "" ||
		*upstreamCert == "" || *upstreamKey == "" {
		log.Fatal("goproxy: -cert, -key, -token-file, -upstream, -upstream-ca, -upstream-cert and -upstream-key are required")
	}
	target, err := url.Parse(*upstreamURL)
	if err != nil {
		log.Fatalf("goproxy: -upstream: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(readTrimmed(*upstreamCA))) {
		log.Fatalf("goproxy: no certificate in %s", *upstreamCA)
	}
	pair, err := tls.LoadX509KeyPair(*upstreamCert, *upstreamKey)
	if err != nil {
		log.Fatalf("goproxy: upstream client certificate: %v", err)
	}
	upstreamTLS := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	expected := []byte("Bearer " + readTrimmed(*tokenFile))

	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			r.Out.Header.Del("Authorization") // the worker's identity is the client certificate
		},
		// as client-go and kube-apiserver do: HTTP/2 to the API server, kept-alive connections
		Transport: &http.Transport{
			TLSClientConfig:     upstreamTLS,
			ForceAttemptHTTP2:   true,
			MaxIdleConnsPerHost: 100,
			IdleConnTimeout:     90 * time.Second,
		},
		FlushInterval: -1, // watches: every event passed on at once
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), expected) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`)
			return
		}
		proxy.ServeHTTP(w, r)
	})

	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("goproxy: %v", err)
	}
	fmt.Printf("serving https://%s\n", listener.Addr())
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second}
	log.Fatal(server.ServeTLS(listener, *certFile, *keyFile))
}
