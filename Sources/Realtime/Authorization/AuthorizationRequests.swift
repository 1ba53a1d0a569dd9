import Foundation
import RealtimeProtocol

/// Asks the app's authoriser closures or auth endpoints (DESIGN.md "The wire protocol":
/// channel authorisation and user authentication), for the connection's `authorize` and
/// `authenticate` actions.
enum AuthorizationRequests {
    /// A channel authorisation: `options.authorizer`, else a form POST of `socket_id` and
    /// `channel_name` to `options.authEndpoint`.
    static func channel(_ request: ChannelAuthorizationRequest, options: BirdRealtime.Options) async -> Result<ChannelAuthorizationResponse, AuthorizationError> {
        var closure: (@Sendable () async throws -> ChannelAuthorizationResponse)?
        if let authorizer = options.authorizer { closure = { try await authorizer(request) } }
        return await obtain(
            closure: closure,
            endpoint: options.authEndpoint, missing: "authEndpoint or authorizer",
            fields: [("socket_id", request.socketID), ("channel_name", request.channelName)], options: options)
    }

    /// A user authentication for signin: `options.userAuthenticator`, else a form POST of
    /// `socket_id` to `options.userAuthEndpoint`.
    static func user(socketID: String, options: BirdRealtime.Options) async -> Result<UserAuthenticationResponse, AuthorizationError> {
        var closure: (@Sendable () async throws -> UserAuthenticationResponse)?
        if let authenticator = options.userAuthenticator { closure = { try await authenticator(socketID) } }
        return await obtain(
            closure: closure,
            endpoint: options.userAuthEndpoint, missing: "userAuthEndpoint or userAuthenticator",
            fields: [("socket_id", socketID)], options: options)
    }

    /// A batched room auth request: `options.roomAuthorizer`, else a JSON POST of `{"rooms":
    /// [names]}` to `options.roomAuthEndpoint` (docs/rooms-protocol.md "Auth route").
    static func rooms(_ names: [String], options: BirdRealtime.Options) async -> Result<RoomAuthorizationResponse, AuthorizationError> {
        if let authorizer = options.roomAuthorizer {
            do {
                return .success(try await authorizer(names))
            } catch let error as AuthorizationError {
                return .failure(error)
            } catch {
                return .failure(.authorizer("\(error)"))
            }
        }
        guard let endpoint = options.roomAuthEndpoint else { return .failure(.notConfigured("roomAuthEndpoint or roomAuthorizer")) }
        do {
            let body = try JSONEncoder().encode(RoomAuthorizationRequest(rooms: names))
            return .success(try await AuthEndpoint.post(endpoint, body: body, contentType: "application/json", headers: options.authHeaders,
                                                        timeout: options.authTimeout, as: RoomAuthorizationResponse.self))
        } catch let error as AuthorizationError {
            return .failure(error)
        } catch {
            return .failure(.invalidResponse("\(error)"))
        }
    }

    /// Asks the app's closure if there is one, else POSTs `fields` to `endpoint`; a closure's
    /// error other than `AuthorizationError` becomes `.authorizer`.
    private static func obtain<Answer: Decodable & Sendable>(
        closure: (@Sendable () async throws -> Answer)?, endpoint: URL?, missing: String,
        fields: [(String, String)], options: BirdRealtime.Options
    ) async -> Result<Answer, AuthorizationError> {
        if let closure {
            do {
                return .success(try await closure())
            } catch let error as AuthorizationError {
                return .failure(error)
            } catch {
                return .failure(.authorizer("\(error)"))
            }
        }
        guard let endpoint else { return .failure(.notConfigured(missing)) }
        do {
            return .success(try await AuthEndpoint.post(endpoint, fields: fields, headers: options.authHeaders,
                                                        timeout: options.authTimeout, as: Answer.self))
        } catch {
            return .failure(error)
        }
    }
}
