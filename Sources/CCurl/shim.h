#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

// libcurl's easy interface for the server's webhooks. curl_easy_setopt is variadic, which Swift
// cannot call: one typed wrapper per option used.
#include <curl/curl.h>

static inline CURLcode ccurl_set_url(CURL *handle, const char *url) {
    return curl_easy_setopt(handle, CURLOPT_URL, url);
}

/// A POST of `length` bytes at `body` (copied by libcurl).
static inline CURLcode ccurl_set_post_body(CURL *handle, const char *body, long length) {
    curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE, length);
    return curl_easy_setopt(handle, CURLOPT_COPYPOSTFIELDS, body);
}

static inline CURLcode ccurl_set_headers(CURL *handle, struct curl_slist *headers) {
    return curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
}

/// The whole transfer's deadline and the connect phase's, in milliseconds; no signals (the
/// process is threaded); http and https only, no redirects followed.
static inline CURLcode ccurl_set_limits(CURL *handle, long timeout_ms, long connect_timeout_ms) {
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
    return curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, timeout_ms);
}

/// Where the response body goes: `write` is called with `context` for each piece; returning
/// less than the piece's size aborts the transfer.
static inline CURLcode ccurl_set_writer(CURL *handle, size_t (*write)(char *, size_t, size_t, void *), void *context) {
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, write);
    return curl_easy_setopt(handle, CURLOPT_WRITEDATA, context);
}

static inline long ccurl_response_code(CURL *handle) {
    long code = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

#endif
