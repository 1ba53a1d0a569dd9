import Foundation
import PackagePlugin

/// Embeds the browser client (`Clients/javascript/src/*.js`, issue 32) in `RealtimeServer` at
/// build time: the tool `embed-client` writes `ClientModule+Files.swift` into the plugin's work
/// directory from the files as they are, so the server always serves the client of its own
/// checkout, and no copy of it is kept in the sources.
@main
struct EmbedClient: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let client = context.package.directoryURL.appending(path: "Clients/javascript")
        let sources = client.appending(path: "src")
        let scripts = try FileManager.default.contentsOfDirectory(at: sources, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "js" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let manifest = client.appending(path: "package.json")
        let output = context.pluginWorkDirectoryURL.appending(path: "ClientModule+Files.swift")
        return [
            .buildCommand(
                displayName: "Embedding the browser client (\(scripts.count) files)",
                executable: try context.tool(named: "embed-client").url,
                arguments: [manifest.path, output.path] + scripts.map(\.path),
                inputFiles: [manifest] + scripts,
                outputFiles: [output]
            ),
        ]
    }
}
