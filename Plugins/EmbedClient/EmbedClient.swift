import Foundation
import PackagePlugin

/// Embeds the browser client (`Clients/javascript/src/*.js`) and the operator's console
/// (`Clients/console/*.{html,css,js}`) in `RealtimeServer` at build time: the tool
/// `embed-client` writes `ClientModule+Files.swift` and `ConsolePage+Files.swift` into the
/// plugin's work directory from the files as they are, so the server always serves the client
/// and console of its own checkout, and no copy of them is kept in the sources.
///
/// SwiftPM plans plugin commands again only when the package changes: an edit to a file is
/// seen at once, and a file added is embedded (the folder is an input), but after a file is
/// removed (or a new one edited) `touch Package.swift` once, or the build stops on the missing
/// input.
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
        let console = context.package.directoryURL.appending(path: "Clients/console")
        let pages = try FileManager.default.contentsOfDirectory(at: console, includingPropertiesForKeys: nil)
            .filter { ["html", "css", "js"].contains($0.pathExtension) }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let consoleOutput = context.pluginWorkDirectoryURL.appending(path: "ConsolePage+Files.swift")
        return [
            .buildCommand(
                displayName: "Embedding the operator's console (\(pages.count) files)",
                executable: try context.tool(named: "embed-client").url,
                arguments: ["--console", consoleOutput.path, console.path],
                inputFiles: [console] + pages,
                outputFiles: [consoleOutput]
            ),
            .buildCommand(
                displayName: "Embedding the browser client (\(scripts.count) files)",
                executable: try context.tool(named: "embed-client").url,
                // The folder itself is an input too: a file added or removed changes it, and the
                // tool lists the folder when it runs.
                arguments: [manifest.path, output.path, sources.path],
                inputFiles: [manifest, sources] + scripts,
                outputFiles: [output]
            ),
        ]
    }
}
