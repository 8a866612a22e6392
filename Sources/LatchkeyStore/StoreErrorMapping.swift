// The one place where SQLite and GRDB failures become StoreErrors. Reasons
// carry the action and the store's path and SQLite's message, never SQL
// arguments (they may hold sealed keys or user data).

import CTAP
import GRDB

extension StoreError {
    /// Maps any error raised while the store performed `action` on the
    /// database at `path`. A `StoreError` thrown from inside a database
    /// block passes through unchanged.
    static func mapping(
        _ error: any Error,
        _ action: String,
        path: String,
        file: String = #fileID,
        line: Int = #line
    ) -> StoreError {
        if let error = error as? StoreError { return error }
        if let error = error as? PathCallError { return error.storeError(action, file: file, line: line) }
        guard let error = error as? DatabaseError else {
            return StoreError(.io, "\(action) in \(path): \(type(of: error))", file: file, line: line)
        }
        let code: StoreError.Code
        switch error.resultCode {
        case .SQLITE_FULL:
            code = .full
        case .SQLITE_IOERR:
            // SQLite reports ENOSPC from write(2) as SQLITE_FULL itself, but a
            // full disk can also surface as an I/O error from fsync, ftruncate
            // or the shared-memory file; ask the filesystem.
            code = Posix.filesystemIsFull(at: path) ? .full : .io
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            code = .locked
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            code = .corrupt
        default:
            code = .io
        }
        let message = error.message ?? "no message"
        return StoreError(
            code,
            "\(action) in \(path): SQLite error \(error.extendedResultCode.rawValue) (\(message))",
            file: file,
            line: line
        )
    }
}
