// The daemon's own directories (the state directory, the control socket's):
// whoever can rename or replace one of them, or anything on the way to it,
// can swap the master key, the lock or the socket for their own. So before
// the daemon puts anything in one:
//
// - the directory itself, created 0700 when missing, must be a real directory
//   (not a symbolic link), owned by the daemon's uid, and writable by neither
//   group nor others (read and search access for the group is allowed: the
//   system unit lets the socket's group into /run/latchkeyd);
// - every directory above it, on the path as given and as it resolves, must
//   be owned by root or the daemon's uid and writable by nobody else: not by
//   others unless it is sticky (/tmp: nobody may rename what another made),
//   and not by a group unless it is sticky, root's group, or the daemon
//   account's own private group.
//
// A directory that fails is refused with a ConfigurationError (exit 78) that
// says what is wrong and how to fix it; nothing is changed on its behalf.
// /tmp/latchkey made 0777 by another account (issue 24) fails the first rule.

import Glibc
import LatchkeyCore

/// Checks (and creates) a directory only the daemon's account may change.
struct PrivateDirectory {
    /// The daemon's account.
    var uid: uid_t = getuid()
    var gid: gid_t = getgid()

    /// Creates `path` (0700, with missing parents) unless it exists, then checks it and
    /// every directory above it; `role` names it in messages ("state directory").
    func prepare(_ path: String, role: String) throws(ConfigurationError) {
        let path = Self.absolute(path)
        try checkAncestors(of: path, role: role)
        var status = stat()
        if lstat(path, &status) != 0 {
            guard errno == ENOENT else {
                throw ConfigurationError("cannot inspect the \(role) \(path): \(String(cString: strerror(errno)))")
            }
            try create(path, role: role)
        } else if status.st_mode & S_IFMT == S_IFLNK {
            throw Self.linkRefusal(path, role: role)
        }
        try checkDirectory(path, role: role)
    }

    /// The directory itself: opened without following a link, then judged by what was
    /// opened.
    func checkDirectory(_ path: String, role: String) throws(ConfigurationError) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ELOOP { throw Self.linkRefusal(path, role: role) }
            if code == ENOTDIR {
                throw ConfigurationError("the \(role) \(path) is not a directory; remove it, or choose another path")
            }
            throw ConfigurationError("cannot open the \(role) \(path): \(String(cString: strerror(code)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw ConfigurationError("cannot inspect the \(role) \(path): \(String(cString: strerror(errno)))")
        }
        guard status.st_uid == uid else {
            throw ConfigurationError(
                "refusing the \(role) \(path): it belongs to \(AccountNames.describe(uid: status.st_uid)), not to "
                    + "\(AccountNames.describe(uid: uid)), which runs latchkeyd, so its owner could replace the "
                    + "master key, the lock or the socket in it. Remove it (or have its owner remove it) and let "
                    + "latchkeyd create it, or choose a directory of your own (--state-dir, --control-socket, "
                    + "state-directory and control-socket in the configuration)"
            )
        }
        let mode = status.st_mode & 0o7777
        guard mode & 0o022 == 0 else {
            throw ConfigurationError(
                "refusing the \(role) \(path): its mode \(String(mode, radix: 8)) lets "
                    + "\(mode & 0o002 != 0 ? "every account" : "its group") create, rename and delete files in "
                    + "it. Make it private: chmod go-w \(path) (chmod 0700 \(path) for the state directory)"
            )
        }
    }

    private static func linkRefusal(_ path: String, role: String) -> ConfigurationError {
        ConfigurationError(
            "the \(role) \(path) is a symbolic link; latchkeyd keeps its files only in a real directory of its "
                + "own, which nobody else can point elsewhere: remove the link, or give the directory's real path"
        )
    }

    /// Each directory above `path`, lexically and after resolving links.
    func checkAncestors(of path: String, role: String) throws(ConfigurationError) {
        var seen: Set<String> = []
        var ancestors = Self.parents(of: path)
        // The directories a link on the way leads through count too.
        if let resolved = ancestors.lazy.compactMap(StateDirectory.resolve).first {
            ancestors += [resolved] + Self.parents(of: resolved)
        }
        for ancestor in ancestors where seen.insert(ancestor).inserted {
            var status = stat()
            guard stat(ancestor, &status) == 0 else {
                if errno == ENOENT { continue }  // made below, by the daemon
                throw ConfigurationError(
                    "cannot inspect \(ancestor), above the \(role) \(path): \(String(cString: strerror(errno)))"
                )
            }
            if let problem = problem(with: status) {
                throw ConfigurationError(
                    "refusing the \(role) \(path): \(ancestor), a directory above it, \(problem), who could "
                        + "rename it and put a directory of their own in its place. Choose a \(role) whose "
                        + "every parent belongs to root or to \(AccountNames.describe(uid: uid)) and is writable "
                        + "by nobody else (or sticky, like /tmp)"
                )
            }
        }
    }

    /// What makes a directory above ours unsafe, nil when nothing does.
    func problem(with status: stat) -> String? {
        guard status.st_uid == 0 || status.st_uid == uid else {
            return "belongs to \(AccountNames.describe(uid: status.st_uid))"
        }
        let sticky = status.st_mode & S_ISVTX != 0
        if status.st_mode & 0o002 != 0 && !sticky {
            return "is writable by every account"
        }
        if status.st_mode & 0o020 != 0 && !sticky && status.st_gid != 0 && !isPrivateGroup(status.st_gid) {
            return "is writable by group \(status.st_gid)\(Self.groupName(status.st_gid).map { " (\($0))" } ?? "")"
        }
        return nil
    }

    /// Whether `group` is the daemon account's own group with nobody else in it.
    private func isPrivateGroup(_ group: gid_t) -> Bool {
        guard group == gid, let entry = getgrgid(group) else { return false }
        var member = entry.pointee.gr_mem
        let name = AccountNames.name(of: uid)
        while let pointer = member?.pointee {
            if String(cString: pointer) != name { return false }
            member = member?.advanced(by: 1)
        }
        return true
    }

    private static func groupName(_ group: gid_t) -> String? {
        getgrgid(group).map { String(cString: $0.pointee.gr_name) }
    }

    /// Creates `path` and its missing parents, each 0700.
    private func create(_ path: String, role: String) throws(ConfigurationError) {
        for directory in Self.parents(of: path).reversed() + [path] {
            if mkdir(directory, 0o700) != 0 && errno != EEXIST {
                throw ConfigurationError("cannot create the \(role) \(directory): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// `path` from the working directory when it is relative.
    static func absolute(_ path: String) -> String {
        guard !path.hasPrefix("/"), let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        let base = String(cString: cwd)
        return (base.hasSuffix("/") ? base : base + "/") + path
    }

    /// "/a/b/c" -> ["/a/b", "/a", "/"].
    static func parents(of path: String) -> [String] {
        var components = path.split(separator: "/").map(String.init)
        var parents: [String] = []
        while !components.isEmpty {
            components.removeLast()
            parents.append("/" + components.joined(separator: "/"))
        }
        return parents
    }
}
